#include "ml/kernels/ren.h"

#include <cmath>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

constexpr int64_t kDim = 32, kHeads = 4;

// Naive multi-head cross-attention with QK LayerNorm, double precision.
std::vector<double> NaiveAttention(const Tensor& x, const Tensor& kv, const RenLayerWeights& l,
                                   int64_t heads, bool project) {
  const int64_t np = x.dim(0), d = x.dim(1), nk = kv.dim(0), dh = d / heads;
  auto matmul = [](const Tensor& a, int64_t rows, const Tensor& w, int64_t d) {
    std::vector<double> out(rows * d, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < d; ++c)
        for (int64_t i = 0; i < d; ++i) out[r * d + c] += double{a.data()[r * d + i]} * w.data()[i * d + c];
    return out;
  };
  const std::vector<double> qp = matmul(x, np, l.w_q, d), kp = matmul(kv, nk, l.w_k, d);
  std::vector<double> vp = project ? matmul(kv, nk, l.w_v, d)
                                   : std::vector<double>(kv.data().begin(), kv.data().end());
  auto norm = [&](std::vector<double>& m, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h) {
        double mean = 0, var = 0;
        for (int64_t c = 0; c < dh; ++c) mean += m[r * d + h * dh + c] / dh;
        for (int64_t c = 0; c < dh; ++c) var += std::pow(m[r * d + h * dh + c] - mean, 2) / dh;
        for (int64_t c = 0; c < dh; ++c) m[r * d + h * dh + c] = (m[r * d + h * dh + c] - mean) / std::sqrt(var + 1e-5);
      }
  };
  std::vector<double> qn = qp, kn = kp;
  norm(qn, np);
  norm(kn, nk);
  std::vector<double> o(np * d, 0.0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < np; ++i) {
      std::vector<double> s(nk);
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < nk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < dh; ++c) dot += qn[i * d + h * dh + c] * kn[j * d + h * dh + c];
        s[j] = dot / std::sqrt(double(dh));
        m = std::max(m, s[j]);
      }
      for (double& v : s) sum += (v = std::exp(v - m));
      for (int64_t c = 0; c < dh; ++c)
        for (int64_t j = 0; j < nk; ++j) o[i * d + h * dh + c] += s[j] / sum * vp[j * d + h * dh + c];
    }
  if (!project) return o;
  std::vector<double> out(np * d, 0.0);
  for (int64_t r = 0; r < np; ++r)
    for (int64_t c = 0; c < d; ++c)
      for (int64_t i = 0; i < d; ++i) out[r * d + c] += o[r * d + i] * l.w_o.data()[i * d + c];
  return out;
}

TEST(Ren, AttentionMatchesNaiveReference) {
  TANDEM_ASSERT_OK_AND_ASSIGN(RenWeights w, RenWeights::Random(kDim, kHeads, 1, 42));
  const Tensor x = RandomTensor({5, kDim}, 1), kv = RandomTensor({12, kDim}, 2);
  for (bool project : {true, false}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(RenAttentionOutput a, RenAttention(x, kv, w.layers[0], kHeads, project));
    const std::vector<double> ref = NaiveAttention(x, kv, w.layers[0], kHeads, project);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(a.out.data()[i], ref[i], 1e-4) << i;
    for (int64_t r = 0; r < kHeads * 5; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < 12; ++j) sum += a.maps.data()[r * 12 + j];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(Ren, SingleKvTokenMakesAttentionIndependentOfQueries) {
  TANDEM_ASSERT_OK_AND_ASSIGN(RenWeights w, RenWeights::Random(kDim, kHeads, 1, 43));
  const Tensor kv = RandomTensor({1, kDim}, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(RenAttentionOutput a,
                              RenAttention(RandomTensor({4, kDim}, 4), kv, w.layers[0], kHeads, false));
  TANDEM_ASSERT_OK_AND_ASSIGN(RenAttentionOutput b,
                              RenAttention(RandomTensor({4, kDim}, 5), kv, w.layers[0], kHeads, false));
  EXPECT_LT(MaxAbsDiff(a.out, b.out), 1e-6);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t c = 0; c < kDim; ++c) EXPECT_FLOAT_EQ(a.out.data()[i * kDim + c], kv.data()[c]);
}

TEST(Ren, ForwardIsPermutationEquivariantOverPrompts) {
  TANDEM_ASSERT_OK_AND_ASSIGN(RenWeights w, RenWeights::Random(kDim, kHeads, 2, 44));
  const Tensor f = RandomTensor({kDim, 5, 6}, 6);
  Tensor pts = *Tensor::FromData({3, 2}, {10, 20, 50, 5, 70, 70});
  Tensor perm = *Tensor::FromData({3, 2}, {70, 70, 10, 20, 50, 5});
  TANDEM_ASSERT_OK_AND_ASSIGN(RenOutput a, RenForward(f, pts, 84, w));
  TANDEM_ASSERT_OK_AND_ASSIGN(RenOutput b, RenForward(f, perm, 84, w));
  ASSERT_EQ(a.tokens.shape(), (std::vector<int64_t>{3, kDim}));
  ASSERT_EQ(a.maps.shape(), (std::vector<int64_t>{kHeads, 3, 30}));
  const int order[3] = {2, 0, 1};  // row r of b is row order[r] of a
  for (int r = 0; r < 3; ++r)
    for (int64_t c = 0; c < kDim; ++c)
      EXPECT_NEAR(b.tokens.data()[r * kDim + c], a.tokens.data()[order[r] * kDim + c], 1e-5);
  // Different prompts give different tokens.
  double diff = 0;
  for (int64_t c = 0; c < kDim; ++c) diff += std::fabs(a.tokens.data()[c] - a.tokens.data()[kDim + c]);
  EXPECT_GT(diff, 1e-2);
}

TEST(Ren, FourierEncodingOfCentreIsSinZeroCosOne) {
  const Tensor g = RandomTensor({2, 4}, 7);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor pe, FourierEncode(*Tensor::FromData({1, 2}, {0.5f, 0.5f}), g));
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(pe.data()[c], 0.0, 1e-6);
    EXPECT_NEAR(pe.data()[4 + c], 1.0, 1e-6);
  }
}

TEST(Ren, MergeGroupsNearDuplicatesAndIsIdempotent) {
  Tensor t = *Tensor::FromData({4, 2}, {1, 0, 0, 1, 1, 0.01f, 0, 2});
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor m, MergeRegionTokens(t, 0.975));
  ASSERT_EQ(m.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_NEAR(m.data()[0], 1.0, 1e-6);
  EXPECT_NEAR(m.data()[1], 0.005, 1e-6);
  EXPECT_NEAR(m.data()[3], 1.5, 1e-6);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor again, MergeRegionTokens(m, 0.975));
  EXPECT_LT(MaxAbsDiff(m, again), 1e-7);
}

TEST(Ren, RejectsBadInputs) {
  EXPECT_THAT(RenWeights::Random(30, 4, 1, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(RenWeights w, RenWeights::Random(kDim, kHeads, 1, 45));
  const Tensor f = RandomTensor({kDim, 3, 3}, 8);
  const Tensor pts = *Tensor::FromData({1, 2}, {1, 1});
  EXPECT_THAT(RenForward(RandomTensor({16, 3, 3}, 9), pts, 42, w),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RenForward(f, RandomTensor({2, 3}, 9), 42, w), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RenForward(f, pts, 0, w), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RenForward(f, *Tensor::FromData({1, 2}, {NAN, 1}), 42, w),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RenWeights broken = w;
  broken.layers[0].w1 = RandomTensor({kDim, kDim}, 10);
  EXPECT_THAT(RenForward(f, pts, 42, broken), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MergeRegionTokens(RandomTensor({2, 2}, 1), 2.0), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels
