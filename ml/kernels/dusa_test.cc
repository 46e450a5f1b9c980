#include "ml/kernels/dusa.h"

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

// (B, H, N, d) -> (B H, N, d): same memory, for the (H, N, d) reference.
Tensor Flatten(const Tensor& t) {
  std::vector<float> data(t.data().begin(), t.data().end());
  return *Tensor::FromData({t.dim(0) * t.dim(1), t.dim(2), t.dim(3)}, std::move(data));
}

struct Inputs {
  Tensor q, k, v;
};
Inputs Make(int64_t b, int64_t h, int64_t n, int64_t d, uint64_t seed) {
  return {RandomTensor({b, h, n, d}, seed), RandomTensor({b, h, n, d}, seed + 1),
          RandomTensor({b, h, n, d}, seed + 2)};
}

TEST(Dusa, BlockSizeNEqualsDenseAttention) {
  const Inputs in = Make(2, 2, 24, 8, 10);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, DusaForward(in.q, in.k, in.v, 24));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dense,
                              DenseAttention(Flatten(in.q), Flatten(in.k), Flatten(in.v), false));
  EXPECT_LT(MaxAbsDiff(Flatten(o), dense), 1e-5);
}

TEST(Dusa, BlockSizeOneEqualsDenseAttention) {
  const Inputs in = Make(1, 3, 20, 8, 20);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, DusaForward(in.q, in.k, in.v, 1));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dense,
                              DenseAttention(Flatten(in.q), Flatten(in.k), Flatten(in.v), false));
  EXPECT_LT(MaxAbsDiff(Flatten(o), dense), 1e-5);
}

TEST(Dusa, StagesEqualMaskedDenseAttention) {
  const int64_t n = 24, b = 4;
  const Inputs in = Make(1, 2, n, 16, 30);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor intra,
                              DusaStageForward(in.q, in.k, in.v, b, DusaStage::kIntraBlock));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      Tensor intra_ref,
      MaskedAttentionNaive(Flatten(in.q), Flatten(in.k), Flatten(in.v),
                           [b](int64_t i, int64_t j) { return i / b == j / b; }));
  EXPECT_LT(MaxAbsDiff(Flatten(intra), intra_ref), 1e-5);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor inter,
                              DusaStageForward(in.q, in.k, in.v, b, DusaStage::kInterBlock));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      Tensor inter_ref,
      MaskedAttentionNaive(Flatten(in.q), Flatten(in.k), Flatten(in.v),
                           [b](int64_t i, int64_t j) { return i % b == j % b; }));
  EXPECT_LT(MaxAbsDiff(Flatten(inter), inter_ref), 1e-5);
}

TEST(Dusa, ForwardIsTwoHopComposition) {
  const int64_t n = 30, b = 5;
  const Inputs in = Make(2, 1, n, 8, 40);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, DusaForward(in.q, in.k, in.v, b));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      Tensor x1, MaskedAttentionNaive(Flatten(in.q), Flatten(in.k), Flatten(in.v),
                                      [b](int64_t i, int64_t j) { return i / b == j / b; }));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      Tensor ref, MaskedAttentionNaive(Flatten(in.q), Flatten(in.k), x1,
                                       [b](int64_t i, int64_t j) { return i % b == j % b; }));
  EXPECT_LT(MaxAbsDiff(Flatten(o), ref), 1e-5);
  // A genuinely sparse pattern differs from dense attention.
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dense,
                              DenseAttention(Flatten(in.q), Flatten(in.k), Flatten(in.v), false));
  EXPECT_GT(MaxAbsDiff(Flatten(o), dense), 1e-3);
}

TEST(Dusa, RejectsBadInputs) {
  const Inputs in = Make(1, 1, 12, 4, 50);
  EXPECT_THAT(DusaForward(in.q, in.k, in.v, 5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DusaForward(in.q, in.k, in.v, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DusaForward(in.q, in.k, in.v, 13), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor other = RandomTensor({1, 1, 12, 8}, 1);
  EXPECT_THAT(DusaForward(in.q, other, in.v, 4), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor rank3 = RandomTensor({1, 12, 4}, 1);
  EXPECT_THAT(DusaForward(rank3, rank3, rank3, 4), StatusIs(absl::StatusCode::kInvalidArgument));
  if (!CudaDeviceAvailable()) {
    EXPECT_THAT(DusaForward(in.q, in.k, in.v, 4, Backend::kCuda),
                StatusIs(absl::StatusCode::kUnavailable));
  }
}

TEST(Dusa, FlopsFormula) {
  EXPECT_DOUBLE_EQ(DusaFlops(1, 16, 2, 4), 4.0 * 16 * 2 * (4 + 4));
}

}  // namespace
}  // namespace tandem::ml::kernels
