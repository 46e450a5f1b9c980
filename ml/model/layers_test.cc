// Finite-difference checks of every layer's backward pass and of the model
// chain, plus validation tests. Gradients are compared in float with
// central differences (eps 1e-2 on smooth inputs, double accumulation of the
// scalar objective); tolerances are relative to the gradient scale.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/basic_layers.h"
#include "ml/model/conv_layers.h"
#include "ml/model/embedding_bag.h"
#include "ml/model/loss.h"
#include "ml/model/model.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

Matrix RandomMatrix(Eigen::Index r, Eigen::Index c, std::mt19937_64& gen, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(gen);
  return m;
}

// Objective: sum(out .* proj) for a fixed random projection.
double Objective(const Layer& l, absl::Span<const float> p, const Matrix& in, const Matrix& proj) {
  Matrix out;
  EXPECT_TRUE(l.Forward(p, in, &out).ok());
  double s = 0;
  for (Eigen::Index i = 0; i < out.size(); ++i) s += double{out.data()[i]} * proj.data()[i];
  return s;
}

void CheckLayerGradients(const Layer& l, Matrix in, uint64_t seed, float eps = 1e-2f,
                         double tol = 2e-2, bool check_input = true) {
  SCOPED_TRACE(l.name());
  std::mt19937_64 gen(seed);
  std::vector<float> p(static_cast<size_t>(l.num_params()));
  l.Init(absl::MakeSpan(p), gen);
  for (float& v : p) v += std::normal_distribution<float>(0.0f, 0.1f)(gen);  // non-trivial biases
  Matrix out;
  ASSERT_THAT(l.Forward(p, in, &out), tandem::testing::IsOk());
  const Matrix proj = RandomMatrix(out.rows(), out.cols(), gen);
  std::vector<float> gp(p.size(), 0.0f);
  Matrix gin;
  l.Backward(p, in, out, proj, check_input ? &gin : nullptr, absl::MakeSpan(gp));
  double scale = 1e-3;
  for (float g : gp) scale = std::max(scale, double{std::abs(g)});
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<float> q = p;
    q[i] = p[i] + eps;
    const double up = Objective(l, q, in, proj);
    q[i] = p[i] - eps;
    const double down = Objective(l, q, in, proj);
    const double fd = (up - down) / (2.0 * eps);
    ASSERT_NEAR(gp[i], fd, tol * std::max(scale, std::abs(fd))) << "param " << i;
  }
  if (!check_input) return;
  double iscale = 1e-3;
  for (Eigen::Index i = 0; i < gin.size(); ++i)
    iscale = std::max(iscale, double{std::abs(gin.data()[i])});
  for (Eigen::Index i = 0; i < in.size(); ++i) {
    Matrix x = in;
    x.data()[i] = in.data()[i] + eps;
    const double up = Objective(l, p, x, proj);
    x.data()[i] = in.data()[i] - eps;
    const double down = Objective(l, p, x, proj);
    const double fd = (up - down) / (2.0 * eps);
    ASSERT_NEAR(gin.data()[i], fd, tol * std::max(iscale, std::abs(fd))) << "input " << i;
  }
}

TEST(DenseLayer, GradientsMatchFiniteDifferences) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, DenseLayer::Create("fc", 7, 5));
  std::mt19937_64 gen(1);
  CheckLayerGradients(*l, RandomMatrix(4, 7, gen), 11);
}

TEST(DenseLayer, ForwardKnownAnswer) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, DenseLayer::Create("fc", 2, 2));
  // W = [[1, 2], [3, 4]], b = [0.5, -1]; x = [1, -1] -> [-0.5, -2].
  const std::vector<float> p = {1, 2, 3, 4, 0.5f, -1};
  Matrix in(1, 2);
  in << 1, -1;
  Matrix out;
  TANDEM_ASSERT_OK(l->Forward(p, in, &out));
  EXPECT_FLOAT_EQ(out(0, 0), -0.5f);
  EXPECT_FLOAT_EQ(out(0, 1), -2.0f);
}

TEST(ActivationLayer, ReluAndGeluGradients) {
  std::mt19937_64 gen(2);
  Matrix in = RandomMatrix(3, 6, gen);
  // Keep ReLU inputs away from the kink so +-eps does not cross zero.
  for (Eigen::Index i = 0; i < in.size(); ++i) {
    if (std::abs(in.data()[i]) < 0.05f) in.data()[i] = 0.3f;
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(auto relu, ActivationLayer::Create("r", Activation::kRelu, 6));
  CheckLayerGradients(*relu, in, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto gelu, ActivationLayer::Create("g", Activation::kGelu, 6));
  CheckLayerGradients(*gelu, in, 4);
}

TEST(ActivationLayer, GeluKnownValues) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto gelu, ActivationLayer::Create("g", Activation::kGelu, 3));
  Matrix in(1, 3), out;
  in << 0.0f, 1.0f, -1.0f;
  TANDEM_ASSERT_OK(gelu->Forward({}, in, &out));
  EXPECT_NEAR(out(0, 0), 0.0, 1e-7);
  EXPECT_NEAR(out(0, 1), 0.8413447, 1e-6);   // Phi(1)
  EXPECT_NEAR(out(0, 2), -0.1586553, 1e-6);  // -Phi(-1)
}

TEST(LayerNormLayer, GradientsMatchFiniteDifferences) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, LayerNormLayer::Create("ln", 6));
  std::mt19937_64 gen(5);
  CheckLayerGradients(*l, RandomMatrix(3, 6, gen, 2.0f), 6, 1e-2f, 3e-2);
}

TEST(LayerNormLayer, OutputHasZeroMeanUnitVariance) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, LayerNormLayer::Create("ln", 16));
  std::vector<float> p(32);
  std::mt19937_64 gen(7);
  l->Init(absl::MakeSpan(p), gen);
  Matrix out;
  TANDEM_ASSERT_OK(l->Forward(p, RandomMatrix(2, 16, gen, 5.0f), &out));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(out.row(r).mean(), 0.0, 1e-5);
    EXPECT_NEAR((out.row(r).array() - out.row(r).mean()).square().mean(), 1.0, 1e-3);
  }
}

TEST(Conv2DLayer, GradientsMatchFiniteDifferencesWithPaddingAndStride) {
  for (auto [stride, pad] : {std::pair<int64_t, int64_t>{1, 1}, {1, 0}, {1, 2}, {2, 0}, {2, 1}}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto l,
                                Conv2DLayer::Create("conv", {2, 5, 6}, {3, 3, stride, pad}));
    std::mt19937_64 gen(8);
    CheckLayerGradients(*l, RandomMatrix(2, 60, gen), 9);
  }
}

TEST(Conv2DLayer, ForwardMatchesDirectConvolution) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, Conv2DLayer::Create("conv", {2, 4, 5}, {3, 3, 1, 1}));
  std::mt19937_64 gen(10);
  std::vector<float> p(static_cast<size_t>(l->num_params()));
  l->Init(absl::MakeSpan(p), gen);
  const Matrix in = RandomMatrix(1, 40, gen);
  Matrix out;
  TANDEM_ASSERT_OK(l->Forward(p, in, &out));
  for (int oc = 0; oc < 3; ++oc) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 5; ++x) {
        double acc = p[3 * 18 + oc];
        for (int c = 0; c < 2; ++c) {
          for (int ky = 0; ky < 3; ++ky) {
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = y + ky - 1, ix = x + kx - 1;
              if (iy < 0 || iy >= 4 || ix < 0 || ix >= 5) continue;
              acc += double{p[oc * 18 + (c * 3 + ky) * 3 + kx]} * in(0, c * 20 + iy * 5 + ix);
            }
          }
        }
        EXPECT_NEAR(out(0, oc * 20 + y * 5 + x), acc, 1e-5);
      }
    }
  }
}

TEST(Conv2DLayer, LargeBatchesMatchRowByRowResults) {
  // 37 rows span several internal GEMM blocks (16 samples each).
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, Conv2DLayer::Create("conv", {2, 6, 6}, {4, 3, 1, 1}));
  std::mt19937_64 gen(30);
  std::vector<float> p(static_cast<size_t>(l->num_params()));
  l->Init(absl::MakeSpan(p), gen);
  const Matrix in = RandomMatrix(37, 72, gen);
  Matrix out, gin;
  TANDEM_ASSERT_OK(l->Forward(p, in, &out));
  const Matrix gout = RandomMatrix(37, out.cols(), gen);
  std::vector<float> gp(p.size(), 0.0f), gp_rows(p.size(), 0.0f);
  l->Backward(p, in, out, gout, &gin, absl::MakeSpan(gp));
  for (int r = 0; r < 37; ++r) {
    Matrix o1, g1;
    TANDEM_ASSERT_OK(l->Forward(p, in.middleRows(r, 1), &o1));
    ASSERT_TRUE(o1.isApprox(out.middleRows(r, 1), 1e-5f)) << r;
    l->Backward(p, in.middleRows(r, 1), o1, gout.middleRows(r, 1), &g1, absl::MakeSpan(gp_rows));
    ASSERT_TRUE(g1.isApprox(gin.middleRows(r, 1), 1e-5f)) << r;
  }
  for (size_t i = 0; i < gp.size(); ++i)
    ASSERT_NEAR(gp[i], gp_rows[i], 1e-3 * (1 + std::abs(gp[i]))) << i;
}

TEST(Pool2DLayer, MaxAndAverageGradients) {
  std::mt19937_64 gen(12);
  // Distinct, well-separated values so +-eps never changes a window's argmax.
  Matrix in(2, 2 * 4 * 4);
  std::vector<float> vals(static_cast<size_t>(in.size()));
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = 0.1f * static_cast<float>(i);
  std::shuffle(vals.begin(), vals.end(), gen);
  std::copy(vals.begin(), vals.end(), in.data());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto mx, Pool2DLayer::Create("mp", PoolKind::kMax, {2, 4, 4}, 2, 2));
  CheckLayerGradients(*mx, in, 13);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto avg,
                              Pool2DLayer::Create("ap", PoolKind::kAverage, {2, 4, 4}, 3, 1));
  CheckLayerGradients(*avg, in, 14);
  // General max path (window 3, stride 1) and the 2x2 fast path on an odd
  // size (5x5 -> 2x2, last row/column dropped).
  TANDEM_ASSERT_OK_AND_ASSIGN(auto mx3,
                              Pool2DLayer::Create("mp3", PoolKind::kMax, {2, 4, 4}, 3, 1));
  CheckLayerGradients(*mx3, in, 16);
  Matrix odd(1, 25);
  for (int i = 0; i < 25; ++i) odd(0, i) = static_cast<float>((i * 7) % 25);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto mx5,
                              Pool2DLayer::Create("mp5", PoolKind::kMax, {1, 5, 5}, 2, 2));
  Matrix out;
  TANDEM_ASSERT_OK(mx5->Forward({}, odd, &out));
  ASSERT_EQ(out.cols(), 4);
  for (int oy = 0; oy < 2; ++oy) {
    for (int ox = 0; ox < 2; ++ox) {
      float m = -1;
      for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) m = std::max(m, odd(0, (2 * oy + dy) * 5 + 2 * ox + dx));
      }
      EXPECT_EQ(out(0, oy * 2 + ox), m);
    }
  }
  CheckLayerGradients(*mx5, odd, 17);
}

TEST(EmbeddingBagLayer, GradientsAndPadding) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, EmbeddingBagLayer::Create("emb", 5, 3, 4));
  Matrix ids(3, 4);
  ids << 0, 2, 2, -1,  //
      4, -1, -1, -1,   //
      -1, -1, -1, -1;  // all padding -> zeros
  CheckLayerGradients(*l, ids, 15, 1e-2f, 2e-2, /*check_input=*/false);
  std::vector<float> p(15);
  for (int i = 0; i < 15; ++i) p[i] = static_cast<float>(i);
  Matrix out;
  TANDEM_ASSERT_OK(l->Forward(p, ids, &out));
  // Row 0: mean of rows 0, 2, 2 = ([0,1,2] + 2*[6,7,8]) / 3.
  EXPECT_FLOAT_EQ(out(0, 0), 4.0f);
  EXPECT_FLOAT_EQ(out(1, 2), 14.0f);
  EXPECT_FLOAT_EQ(out(2, 1), 0.0f);
}

TEST(EmbeddingBagLayer, RejectsOutOfRangeAndFractionalIds) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, EmbeddingBagLayer::Create("emb", 5, 3, 2));
  std::vector<float> p(15, 0.0f);
  Matrix out, ids(1, 2);
  ids << 1, 5;
  EXPECT_THAT(l->Forward(p, ids, &out), StatusIs(absl::StatusCode::kInvalidArgument));
  ids << 1.5f, 0;
  EXPECT_THAT(l->Forward(p, ids, &out), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SoftmaxCrossEntropy, KnownAnswerAndGradient) {
  Matrix logits(1, 3);
  logits << 1.0f, 2.0f, 3.0f;
  Matrix grad;
  const std::vector<int> label = {2};
  TANDEM_ASSERT_OK_AND_ASSIGN(LossResult r, SoftmaxCrossEntropy(logits, label, &grad));
  // -log(e^3 / (e^1 + e^2 + e^3)) = 0.40760596.
  EXPECT_NEAR(r.mean_loss, 0.40760596, 1e-6);
  EXPECT_EQ(r.correct, 1);
  EXPECT_NEAR(grad(0, 0), 0.09003057, 1e-6);
  EXPECT_NEAR(grad(0, 2), 0.66524096 - 1.0, 1e-6);
}

TEST(SoftmaxCrossEntropy, StableForHugeLogitsAndRejectsBadLabels) {
  Matrix logits(1, 2);
  logits << 1e4f, -1e4f;
  TANDEM_ASSERT_OK_AND_ASSIGN(LossResult r,
                              SoftmaxCrossEntropy(logits, std::vector<int>{1}, nullptr));
  EXPECT_NEAR(r.mean_loss, 2e4, 1.0);
  EXPECT_THAT(SoftmaxCrossEntropy(logits, std::vector<int>{2}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SoftmaxCrossEntropy(logits, std::vector<int>{0, 1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Model, EndToEndCnnGradientMatchesFiniteDifferences) {
  CnnOptions o{3, 4, 8};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto model, MakeCnn({1, 8, 8}, 3, o));
  model->InitFromSeed(21);
  std::mt19937_64 gen(22);
  const Matrix x = RandomMatrix(2, 64, gen);
  const std::vector<int> y = {0, 2};
  auto loss_at = [&](const Model& m) {
    Activations a;
    EXPECT_TRUE(m.Forward(x, &a).ok());
    return SoftmaxCrossEntropy(a.logits(), y, nullptr)->mean_loss;
  };
  Activations acts;
  TANDEM_ASSERT_OK(model->Forward(x, &acts));
  Matrix gl;
  TANDEM_ASSERT_OK(SoftmaxCrossEntropy(acts.logits(), y, &gl, 0.5f).status());
  std::vector<float> grad(static_cast<size_t>(model->num_params()), 0.0f);
  TANDEM_ASSERT_OK(model->Backward(acts, gl, absl::MakeSpan(grad)));
  // Spot-check a spread of parameters (every tensor gets some).
  int checked = 0, agree = 0;
  for (int64_t i = 0; i < model->num_params(); i += 7) {
    auto m2 = model->Clone();
    const float eps = 1e-2f;
    m2->mutable_params()[i] += eps;
    const double up = loss_at(*m2);
    m2->mutable_params()[i] -= 2 * eps;
    const double down = loss_at(*m2);
    const double fd = (up - down) / (2 * eps);
    ++checked;
    // ReLU/max-pool kinks make a few finite differences unreliable.
    if (std::abs(fd - grad[i]) <= 2e-2 * std::max(1e-2, std::abs(fd))) ++agree;
  }
  EXPECT_GE(agree, checked * 95 / 100) << agree << " of " << checked;
}

// MakeCnn runs conv-maxpool-relu; the textbook conv-relu-maxpool with the
// same parameters gives bit-identical logits and parameter gradients (ReLU
// commutes with max, and both orders route a window's gradient to the same
// cell or drop it). Also run twice: the per-layer gradient buffers that
// Backward reuses across calls carry nothing over.
TEST(Model, CnnPoolBeforeReluMatchesReluBeforePool) {
  CnnOptions o{3, 4, 8};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fast, MakeCnn({1, 8, 8}, 3, o));
  fast->InitFromSeed(31);
  std::vector<std::unique_ptr<Layer>> layers;
  ImageShape s{1, 8, 8};
  for (int i = 1; i <= 2; ++i) {
    auto c = *Conv2DLayer::Create(absl::StrCat("conv", i), s, {i == 1 ? 3 : 4, 3, 1, 1});
    s = c->out_shape();
    layers.push_back(std::move(c));
    layers.push_back(
        *ActivationLayer::Create(absl::StrCat("relu", i), Activation::kRelu, s.size()));
    auto p = *Pool2DLayer::Create(absl::StrCat("pool", i), PoolKind::kMax, s, 2, 2);
    s = p->out_shape();
    layers.push_back(std::move(p));
  }
  layers.push_back(*DenseLayer::Create("fc1", s.size(), 8));
  layers.push_back(*ActivationLayer::Create("relu3", Activation::kRelu, 8));
  layers.push_back(*DenseLayer::Create("out", 8, 3));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto textbook, Model::Create(std::move(layers)));
  TANDEM_ASSERT_OK(textbook->SetParams(fast->params()));
  std::mt19937_64 gen(32);
  const std::vector<int> y = {0, 2, 1, 1, 0};
  for (int round = 0; round < 2; ++round) {
    const Matrix x = RandomMatrix(5, 64, gen);
    std::vector<float> grads[2];
    Matrix logits[2];
    int k = 0;
    for (const Model* m : {fast.get(), textbook.get()}) {
      Activations acts;
      TANDEM_ASSERT_OK(m->Forward(x, &acts));
      Matrix gl;
      TANDEM_ASSERT_OK(SoftmaxCrossEntropy(acts.logits(), y, &gl, 0.2f).status());
      grads[k].assign(static_cast<size_t>(m->num_params()), 0.0f);
      TANDEM_ASSERT_OK(m->Backward(acts, gl, absl::MakeSpan(grads[k])));
      logits[k++] = acts.logits();
    }
    EXPECT_EQ(logits[0], logits[1]);
    EXPECT_EQ(grads[0], grads[1]) << "round " << round;
    EXPECT_GT(std::count_if(grads[0].begin(), grads[0].end(), [](float v) { return v != 0; }),
              static_cast<long>(grads[0].size() / 2));
  }
}

TEST(Model, CreateRejectsBrokenChainsAndDuplicates) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(*DenseLayer::Create("a", 4, 3));
  layers.push_back(*DenseLayer::Create("b", 5, 2));
  EXPECT_THAT(Model::Create(std::move(layers)), StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<std::unique_ptr<Layer>> dup;
  dup.push_back(*DenseLayer::Create("a", 4, 4));
  dup.push_back(*DenseLayer::Create("a", 4, 2));
  EXPECT_THAT(Model::Create(std::move(dup)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Model::Create({}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DenseLayer::Create("x", 0, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Conv2DLayer::Create("c", {1, 2, 2}, {1, 5, 1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Pool2DLayer::Create("p", PoolKind::kMax, {1, 2, 2}, 3, 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Model, ParamInfosDistinguishWeightsAndBiasesAndFlattenRoundTrips) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto model, MakeMlp(6, {5}, 3));
  ASSERT_EQ(model->param_infos().size(), 4u);
  EXPECT_EQ(model->param_infos()[0].name, "fc1.weight");
  EXPECT_TRUE(model->param_infos()[0].recyclable());
  EXPECT_EQ(model->param_infos()[1].name, "fc1.bias");
  EXPECT_FALSE(model->param_infos()[1].recyclable());
  EXPECT_EQ(model->param_infos()[2].offset, 35);
  EXPECT_EQ(model->num_params(), 6 * 5 + 5 + 5 * 3 + 3);
  model->InitFromSeed(3);
  std::vector<float> flat = model->Flatten();
  auto other = model->Clone();
  other->InitFromSeed(4);
  EXPECT_NE(other->Flatten(), flat);
  TANDEM_ASSERT_OK(other->SetParams(flat));
  EXPECT_EQ(other->Flatten(), flat);
  EXPECT_THAT(other->SetParams(std::vector<float>(3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  flat[0] = std::nanf("");
  EXPECT_THAT(other->SetParams(flat), StatusIs(absl::StatusCode::kInvalidArgument));
  Matrix wrong(1, 7);
  Activations a;
  EXPECT_THAT(model->Forward(wrong, &a), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
