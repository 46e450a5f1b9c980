#include "ml/kernels/spotlight.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;

TEST(Spotlight, HashMatchesNaiveMlp) {
  const int64_t d = 32;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Random(d, 5));
  const Tensor x = RandomTensor({3, d}, 6);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor h, SpotlightHash(x, w));
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<double> a(d), out(d);
    for (int64_t c = 0; c < d; ++c) {
      double u = w.b1.data()[c];
      for (int64_t i = 0; i < d; ++i) u += double{x.data()[r * d + i]} * w.w1.data()[i * d + c];
      a[c] = u / (1 + std::exp(-u)) + x.data()[r * d + c];
    }
    for (int64_t c = 0; c < d; ++c) {
      double o = w.b2.data()[c] + a[c];
      for (int64_t i = 0; i < d; ++i) o += a[i] * w.w2.data()[i * d + c];
      EXPECT_NEAR(h.data()[r * d + c], o, 1e-4);
    }
  }
}

TEST(Spotlight, ZeroWeightsHashIsSignOfInput) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Zeros(64));
  const Tensor x = RandomTensor({5, 64}, 7);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor h, SpotlightHash(x, w));
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes c, PackSignBits(h));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor signs, UnpackSigns(c));
  for (int64_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(signs.data()[i], x.data()[i] > 0 ? 1.0f : -1.0f);
  }
}

TEST(Spotlight, PackBitOrderIsLsbFirst) {
  Tensor h = *Tensor::Zeros({1, 64});
  h.mutable_data()[0] = 1.0f;   // word 0 bit 0
  h.mutable_data()[33] = 2.0f;  // word 1 bit 1
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes c, PackSignBits(h));
  EXPECT_THAT(c.bits, ElementsAre(1u, 2u));
}

TEST(Spotlight, PopcountIdentityAndTopKEqualsSignDotTopK) {
  const int64_t d = 128, n = 500, g = 4;
  const Tensor qh = RandomTensor({g, d}, 8), kh = RandomTensor({n, d}, 9);
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes qc, PackSignBits(qh));
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes kc, PackSignBits(kh));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> s, HammingScores(qc, kc));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor qs, UnpackSigns(qc));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor ks, UnpackSigns(kc));
  std::vector<double> dots(n, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t q = 0; q < g; ++q) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += qs.data()[q * d + c] * ks.data()[j * d + c];
      dots[j] += (d + dot) / 2;  // s = (d + <sgn, sgn>) / 2 per query head
    }
    EXPECT_EQ(s[j], static_cast<int32_t>(dots[j])) << j;
  }
  const int64_t k = 37;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> top, HammingTopK(qc, kc, k));
  std::vector<int64_t> ref(n);
  std::iota(ref.begin(), ref.end(), 0);
  std::stable_sort(ref.begin(), ref.end(), [&](int64_t a, int64_t b) { return dots[a] > dots[b]; });
  ref.resize(k);
  EXPECT_EQ(top, ref);
  // The selection over the scores already computed is the same top-k.
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> from_scores, TopKOfScores(qc, s, k));
  EXPECT_EQ(from_scores, ref);
}

// Every word count (the 64-bit and vector paths, odd counts, row counts
// that leave a tail) against popcounts of 32-bit words one at a time.
TEST(Spotlight, HammingScoresOfEveryWidthMatchWordByWordPopcounts) {
  std::mt19937 gen(7);
  for (int64_t words : {1, 2, 3, 4, 6}) {
    for (int64_t g : {1, 3}) {
      for (int64_t n : {1, 3, 5, 4099}) {
        PackedCodes q{g, words, std::vector<uint32_t>(static_cast<size_t>(g * words))};
        PackedCodes k{n, words, std::vector<uint32_t>(static_cast<size_t>(n * words))};
        for (uint32_t& w : q.bits) w = static_cast<uint32_t>(gen());
        for (uint32_t& w : k.bits) w = static_cast<uint32_t>(gen());
        TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> s, HammingScores(q, k));
        for (int64_t j = 0; j < n; ++j) {
          int32_t want = 0;
          for (int64_t qi = 0; qi < g; ++qi) {
            for (int64_t w = 0; w < words; ++w) {
              want += std::popcount(~(q.bits[qi * words + w] ^ k.bits[j * words + w]));
            }
          }
          ASSERT_EQ(s[j], want) << "words " << words << " g " << g << " n " << n << " j " << j;
        }
      }
    }
  }
}

// The counting selection against a stable sort (best first, ties by
// position) on scores with many ties, for every k.
TEST(Spotlight, TopKOfScoresIsTheStableSortPrefix) {
  const PackedCodes q{2, 1, {0u, 0u}};  // scores in [0, 64]
  std::mt19937 gen(5);
  std::uniform_int_distribution<int32_t> score(0, 64);
  for (int64_t n : {1, 7, 300}) {
    std::vector<int32_t> scores(static_cast<size_t>(n));
    for (int32_t& x : scores) x = score(gen) / 8 * 8;  // 9 values: many ties
    std::vector<int64_t> ref(static_cast<size_t>(n));
    std::iota(ref.begin(), ref.end(), 0);
    std::stable_sort(ref.begin(), ref.end(),
                     [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
    for (int64_t k = 1; k <= n; ++k) {
      TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> top, TopKOfScores(q, scores, k));
      ASSERT_EQ(top, std::vector<int64_t>(ref.begin(), ref.begin() + k)) << n << " " << k;
    }
  }
}

TEST(Spotlight, TopKOfScoresRefusesWhatHammingScoresCannotReturn) {
  const PackedCodes q{1, 1, {0u}};  // scores lie in [0, 32]
  const std::vector<int32_t> scores = {3, 32, 0, 32, 7};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> top, TopKOfScores(q, scores, 3));
  EXPECT_THAT(top, ElementsAre(1, 3, 4));
  EXPECT_TRUE(absl::IsInvalidArgument(TopKOfScores(q, scores, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(TopKOfScores(q, scores, 6).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(TopKOfScores(q, std::vector<int32_t>{1, 33}, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(TopKOfScores(q, std::vector<int32_t>{-1, 2}, 1).status()));
}

TEST(Spotlight, TiesBreakTowardsLowerPosition) {
  PackedCodes q{1, 1, {0xffffffffu}};
  PackedCodes keys{6, 1, {7u, 0xffffffffu, 7u, 0xffffffffu, 7u, 0u}};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> top, HammingTopK(q, keys, 4));
  EXPECT_THAT(top, ElementsAre(1, 3, 0, 2));
}

TEST(Spotlight, DefaultTopK) {
  EXPECT_EQ(SpotlightDefaultTopK(5), 5);
  EXPECT_EQ(SpotlightDefaultTopK(100), 20);
  EXPECT_EQ(SpotlightDefaultTopK(10000), 200);
}

TEST(Spotlight, SelectingAllKeysIsExactAttention) {
  const Tensor q = RandomTensor({4, 16}, 10), k = RandomTensor({30, 16}, 11),
               v = RandomTensor({30, 16}, 12);
  std::vector<int64_t> all(30);
  std::iota(all.begin(), all.end(), 0);
  std::reverse(all.begin(), all.end());  // order must not matter
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, SelectedAttention(q, k, v, all));
  Tensor q3 = *Tensor::FromData({4, 1, 16}, std::vector<float>(q.data().begin(), q.data().end()));
  Tensor k3 = *Tensor::FromData({1, 30, 16}, std::vector<float>(k.data().begin(), k.data().end()));
  Tensor v3 = *Tensor::FromData({1, 30, 16}, std::vector<float>(v.data().begin(), v.data().end()));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dense, DenseAttention(q3, k3, v3, false));
  EXPECT_LT(MaxAbsDiff(*Tensor::FromData({4, 16}, std::move(dense).release()), o), 1e-5);
}

TEST(Spotlight, RejectsMalformedInputs) {
  PackedCodes q{1, 4, {1, 2, 3, 4}};
  PackedCodes bad{2, 4, {1, 2, 3}};
  EXPECT_THAT(HammingScores(q, bad), StatusIs(absl::StatusCode::kInvalidArgument));
  PackedCodes other{2, 2, {1, 2, 3, 4}};
  EXPECT_THAT(HammingScores(q, other), StatusIs(absl::StatusCode::kInvalidArgument));
  PackedCodes keys{2, 4, {1, 2, 3, 4, 5, 6, 7, 8}};
  EXPECT_THAT(HammingTopK(q, keys, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HammingTopK(q, keys, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PackSignBits(RandomTensor({2, 33}, 1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SpotlightHashWeights::Random(48, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Zeros(32));
  EXPECT_THAT(SpotlightHash(RandomTensor({2, 64}, 1), w), StatusIs(absl::StatusCode::kInvalidArgument));
  w.b1 = RandomTensor({31}, 1);
  EXPECT_THAT(SpotlightHash(RandomTensor({2, 32}, 1), w), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor k = RandomTensor({3, 8}, 2);
  EXPECT_THAT(SelectedAttention(RandomTensor({1, 8}, 3), k, k, {3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  if (!CudaDeviceAvailable()) {
    EXPECT_THAT(HammingScores(q, keys, Backend::kCuda), StatusIs(absl::StatusCode::kUnavailable));
  }
}

}  // namespace
}  // namespace tandem::ml::kernels
