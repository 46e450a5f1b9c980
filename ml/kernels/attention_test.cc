#include "ml/kernels/attention.h"

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

TEST(DenseAttention, MatchesNaiveWithGqa) {
  const Tensor q = RandomTensor({4, 37, 16}, 1);
  const Tensor k = RandomTensor({2, 37, 16}, 2);
  const Tensor v = RandomTensor({2, 37, 16}, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor fast, DenseAttention(q, k, v, false));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor ref,
                              MaskedAttentionNaive(q, k, v, [](int64_t, int64_t) { return true; }));
  EXPECT_LT(MaxAbsDiff(fast, ref), 1e-5);
}

TEST(DenseAttention, CausalMatchesNaiveAcrossTilesAndShorterQuery) {
  // 300 keys, 200 queries: spans two query tiles and a position offset.
  const Tensor q = RandomTensor({2, 200, 8}, 4);
  const Tensor k = RandomTensor({1, 300, 8}, 5);
  const Tensor v = RandomTensor({1, 300, 8}, 6);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor fast, DenseAttention(q, k, v, true));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      Tensor ref, MaskedAttentionNaive(q, k, v, [](int64_t i, int64_t j) { return j <= 100 + i; }));
  EXPECT_LT(MaxAbsDiff(fast, ref), 1e-5);
}

// Keys over several 512-key blocks: a decode-sized query (the G heads of a
// KV head share one tile) and a prefill-sized one (tiles of 128 queries),
// causal and not, against the naive double-precision reference.
TEST(DenseAttention, OnlineSoftmaxAcrossKeyBlocksMatchesNaive) {
  struct Case {
    int64_t h, hkv, nq, nk, d;
  };
  // Tiles of up to 16 rows take the few-rows kernels (internal/few_rows.h):
  // head dims 16, 32 and 128 their vector path, 8 and 4 the plain one; 20
  // rows are a GEMM. The 65537 and 70000 cases: keys split into spans of
  // 32K merged after (few tiles), one span's single key seen by the last
  // query alone when causal.
  for (const Case& c : {Case{8, 2, 5, 1300, 16}, Case{2, 1, 150, 1200, 8}, Case{3, 3, 1, 1025, 4},
                        Case{2, 1, 5, 65537, 8}, Case{4, 2, 1, 70000, 4}, Case{4, 1, 1, 1300, 32},
                        Case{8, 2, 2, 700, 128}, Case{4, 1, 3, 529, 32}}) {
    const Tensor q = RandomTensor({c.h, c.nq, c.d}, 10 + c.nq);
    const Tensor k = RandomTensor({c.hkv, c.nk, c.d}, 11), v = RandomTensor({c.hkv, c.nk, c.d}, 12);
    for (bool causal : {false, true}) {
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor fast, DenseAttention(q, k, v, causal));
      const int64_t offset = c.nk - c.nq;
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor ref,
                                  MaskedAttentionNaive(q, k, v, [&](int64_t i, int64_t j) {
                                    return !causal || j <= offset + i;
                                  }));
      EXPECT_LT(MaxAbsDiff(fast, ref), 1e-5) << c.h << "x" << c.nq << " causal " << causal;
    }
  }
}

TEST(DenseAttention, FirstCausalRowCopiesFirstValue) {
  const Tensor q = RandomTensor({1, 5, 4}, 7);
  const Tensor k = RandomTensor({1, 5, 4}, 8);
  const Tensor v = RandomTensor({1, 5, 4}, 9);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, DenseAttention(q, k, v, true));
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(o.data()[c], v.data()[c]);
}

TEST(DenseAttention, RejectsBadShapes) {
  const Tensor q = RandomTensor({3, 4, 8}, 1);
  const Tensor k = RandomTensor({2, 4, 8}, 2);
  EXPECT_THAT(DenseAttention(q, k, k, false), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor k2 = RandomTensor({3, 4, 4}, 2);
  EXPECT_THAT(DenseAttention(q, k2, k2, false), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor short_k = RandomTensor({3, 2, 8}, 2);
  EXPECT_THAT(DenseAttention(q, short_k, short_k, true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DenseAttention(q, q, RandomTensor({3, 5, 8}, 3), false),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MaskedAttentionNaive(q, q, q, [](int64_t, int64_t) { return false; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels
