// The training kernels through the registry: request validation, caps, and
// outputs equal to direct library calls.
#include "ml/worker/training_kernels.h"

#include <string>
#include <vector>

#include "base/status_macros.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/kernels/training/cross_spectra.h"
#include "ml/kernels/training/plrf.h"
#include "ml/kernels/training/reweighted_pruning.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::ml::kernels::Tensor;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;
namespace tr = ::tandem::ml::kernels::training;

class TrainingKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterTrainingKernels(&registry_).ok()); }

  absl::StatusOr<std::vector<proto::Tensor>> Run(const proto::KernelRequest& req) {
    return registry_.Run(req);
  }

  KernelRegistry registry_;
};

TEST_F(TrainingKernelsTest, RegistersSixKernelsOnce) {
  EXPECT_EQ(registry_.Describe().size(), 6u);
  EXPECT_THAT(RegisterTrainingKernels(&registry_), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TrainingKernelsTest, PlrfCurveMatchesTheLibrary) {
  proto::KernelRequest req;
  req.set_kernel("dana.plrf_curve");
  auto& p = *req.mutable_params();
  p["v"] = 200;
  p["d"] = 50;
  p["steps"] = 300;
  p["optimizer"] = 0;
  p["log_points"] = 8;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> out, Run(req));
  ASSERT_EQ(out.size(), 2u);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor risk, ToFloatTensor(out[1]));
  auto problem = *tr::PlrfProblem::Create({.alpha = 1, .beta = 0.3, .v = 200, .d = 50, .seed = 1});
  TANDEM_ASSERT_OK_AND_ASSIGN(
      tr::PlrfCurve want,
      tr::RunPlrf(*problem, tr::PlrfOptimizer::kDanaDecaying,
                  {.steps = 300, .batch = 1, .momentum = 0.9, .sample_seed = 2, .log_points = 8}));
  ASSERT_EQ(risk.size(), static_cast<int64_t>(want.risk.size()));
  for (int64_t i = 0; i < risk.size(); ++i) {
    EXPECT_EQ(risk.data()[i], static_cast<float>(want.risk[i]));
  }
  EXPECT_EQ(out[0].shape(0), risk.size());
  // 2 v d steps FLOPs beyond the cap.
  p["v"] = 1 << 16;
  p["d"] = 1000;
  p["steps"] = 1e6;
  EXPECT_THAT(Run(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TrainingKernelsTest, CrossSpectraForwardAndAdjointMatchTheLibrary) {
  const Tensor coeffs = RandomTensor({2, 10}, 3);
  proto::KernelRequest req;
  req.set_kernel("crossspectra.forward");
  *req.add_inputs() = EncodeFloat("coefficients", coeffs);
  auto& p = *req.mutable_params();
  p["layers"] = 4;
  p["d_out"] = 6;
  p["d_in"] = 8;
  p["transform"] = 0;
  p["scale"] = 0.5;
  p["location_seed"] = 9;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> out, Run(req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dw, ToFloatTensor(out[0]));
  TANDEM_ASSERT_OK_AND_ASSIGN(tr::SpectralLocations loc, tr::SampleSpectralLocations(18, 8, 10, 9));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      auto cs, tr::CrossSpectra::Create({.layers = 4, .projections = 3, .d_out = 6, .d_in = 8,
                                         .kappa1 = 10, .kappa2 = 2,
                                         .transform = tr::LayerTransform::kDft, .scale = 0.5},
                                        loc));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor want, cs->Forward(coeffs));
  EXPECT_EQ(dw.shape(), want.shape());
  EXPECT_EQ(std::vector<float>(dw.data().begin(), dw.data().end()),
            std::vector<float>(want.data().begin(), want.data().end()));
  ASSERT_EQ(out[1].shape_size(), 2);
  EXPECT_EQ(out[1].shape(0), 10);

  const Tensor g = RandomTensor({4, 3, 6, 8}, 4);
  proto::KernelRequest adj;
  adj.set_kernel("crossspectra.adjoint");
  *adj.add_inputs() = EncodeFloat("grad_delta", g);
  auto& q = *adj.mutable_params();
  q["kappa1"] = 10;
  q["kappa2"] = 2;
  q["transform"] = 0;
  q["scale"] = 0.5;
  q["location_seed"] = 9;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> gout, Run(adj));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gc, ToFloatTensor(gout[0]));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gwant, cs->Adjoint(g));
  EXPECT_EQ(std::vector<float>(gc.data().begin(), gc.data().end()),
            std::vector<float>(gwant.data().begin(), gwant.data().end()));
  q["kappa2"] = 5;  // > layers
  EXPECT_THAT(Run(adj), StatusIs(absl::StatusCode::kInvalidArgument));
  p["layers"] = 1 << 20;  // Delta W beyond the scratch cap
  EXPECT_THAT(Run(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TrainingKernelsTest, ReweightedGradientMatchesTheLibraryAndChecksMasks) {
  const std::vector<uint8_t> masks = {1, 0, 1, 0, 0, 1, 1, 1};  // K = 2, n = 4
  const std::vector<float> scores = {0.4f, 0.5f, 0.6f, 0.7f}, old = {0.5f, 0.5f, 0.5f, 0.5f};
  proto::KernelRequest req;
  req.set_kernel("prune.reweighted_gradient");
  *req.add_inputs() = EncodeBytes("masks", {2, 4}, std::string(masks.begin(), masks.end()));
  *req.add_inputs() = EncodeFloat("losses", *Tensor::FromData({2}, {1.5f, 0.5f}));
  *req.add_inputs() = EncodeFloat("scores", *Tensor::FromData({4}, scores));
  *req.add_inputs() = EncodeFloat("old_scores", *Tensor::FromData({4}, old));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> out, Run(req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor grad, ToFloatTensor(out[0]));
  tr::SubModelSamples smp{.n = 4, .scores = old, .masks = masks, .losses = {1.5, 0.5}};
  TANDEM_ASSERT_OK_AND_ASSIGN(tr::ReweightedGradient want,
                              tr::ReweightedScoreGradient(smp, scores, {}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(grad.data()[i], want.grad[i]);
  proto::KernelRequest bad = req;
  bad.mutable_inputs(0)->set_data(std::string("\x02\x00\x01\x00\x00\x01\x01\x01", 8));
  EXPECT_THAT(Run(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest shape = req;
  *shape.mutable_inputs(1) = EncodeFloat("losses", *Tensor::FromData({3}, {1, 2, 3}));
  EXPECT_THAT(Run(shape), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TrainingKernelsTest, ProjectReturnsFeasibleScoresAndTopKMask) {
  proto::KernelRequest req;
  req.set_kernel("prune.project");
  *req.add_inputs() = EncodeFloat("x", *Tensor::FromData({4}, {0.9f, 0.8f, 0.1f, 0.95f}));
  (*req.mutable_params())["keep"] = 2;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> out, Run(req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, ToFloatTensor(out[0]));
  double sum = 0;
  for (float v : y.data()) sum += v;
  EXPECT_LE(sum, 2.0 + 1e-5);
  EXPECT_EQ(out[1].data(), std::string("\x01\x00\x00\x01", 4));
  (*req.mutable_params())["keep"] = 5;
  EXPECT_THAT(Run(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TrainingKernelsTest, LayerMaskHitsTheSparsityAndBeatsARandomMask) {
  proto::KernelRequest req;
  req.set_kernel("prune.layer_mask");
  const Tensor x = RandomTensor({32, 8}, 5), w = RandomTensor({8, 4}, 6);
  *req.add_inputs() = EncodeFloat("x", x);
  *req.add_inputs() = EncodeFloat("w", w);
  (*req.mutable_params())["steps"] = 200;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<proto::Tensor> out, Run(req));
  const std::string& mask = out[0].data();
  ASSERT_EQ(mask.size(), 32u);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), '\x01'), 16);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor loss, ToFloatTensor(out[2]));
  auto layer = *tr::LayerReconstruction::Create(x, w);
  std::vector<uint8_t> alternate(32);
  for (int i = 0; i < 32; ++i) alternate[i] = i % 2;
  EXPECT_LT(loss.data()[0], *layer->Loss(alternate));
  (*req.mutable_params())["sparsity"] = 0;  // keeps everything: not a pruning
  EXPECT_THAT(Run(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::worker
