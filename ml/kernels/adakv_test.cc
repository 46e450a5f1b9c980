#include "ml/kernels/adakv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

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

Tensor SpecScores() {
  return *Tensor::FromData({3, 5}, {.5f, .3f, .1f, .05f, .05f, .9f, .04f, .03f, .02f, .01f, .97f,
                                    .01f, .01f, .005f, .005f});
}

TEST(AdaKv, SpecVectorCountsAndSafeguardCaps) {
  TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation a, AllocateBudgets(SpecScores(), 2, 0.2));
  EXPECT_THAT(a.counts, ElementsAre(4, 1, 1));
  EXPECT_THAT(a.caps, ElementsAre(3, 1, 1));  // sum 5 != 6: rounding, allowed
  TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation none, AllocateBudgets(SpecScores(), 2, 0.0));
  EXPECT_THAT(none.caps, ElementsAre(4, 1, 1));
}

double RetainedMass(const Tensor& s, const std::vector<std::vector<int64_t>>& kept, int64_t l) {
  double m = 0;
  for (size_t h = 0; h < kept.size(); ++h) {
    for (int64_t p : kept[h]) {
      if (p < l) m += s.data()[h * l + p];
    }
  }
  return m;
}

TEST(AdaKv, SpecVectorAdaptiveRetainsMoreThanUniform) {
  const Tensor s = SpecScores();
  TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation a, AllocateBudgets(s, 2, 0.0));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto adaptive, SelectKept(s, a.caps, 0));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto uniform, SelectKept(s, {2, 2, 2}, 0));
  EXPECT_NEAR(RetainedMass(s, adaptive, 5), 2.82, 1e-6);
  EXPECT_NEAR(RetainedMass(s, uniform, 5), 2.72, 1e-6);
}

TEST(AdaKv, PropertyAdaptiveAtLeastUniformAndCapSumNearBudget) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE(seed);
    Tensor s = RandomTensor({4, 50}, seed);
    for (float& x : s.mutable_data()) x = std::exp(x);
    const int64_t bp = 1 + static_cast<int64_t>(seed % 30);
    TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation a0, AllocateBudgets(s, bp, 0.0));
    EXPECT_EQ(std::accumulate(a0.counts.begin(), a0.counts.end(), int64_t{0}), 4 * bp);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto adaptive, SelectKept(s, a0.caps, 0));
    TANDEM_ASSERT_OK_AND_ASSIGN(auto uniform, SelectKept(s, std::vector<int64_t>(4, bp), 0));
    EXPECT_GE(RetainedMass(s, adaptive, 50), RetainedMass(s, uniform, 50) - 1e-4);
    TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation a, AllocateBudgets(s, bp, 0.2));
    const int64_t sum = std::accumulate(a.caps.begin(), a.caps.end(), int64_t{0});
    // Rounding moves each cap by <= 1/2 and int(B' alpha) drops the fraction
    // of B' alpha per head, so |sum - H B'| <= H/2 + H frac(B' alpha) (the
    // spec's H/2 bound is the case of an integral B' alpha).
    const double frac = bp * 0.2 - std::floor(bp * 0.2);
    EXPECT_LE(std::abs(sum - 4 * bp), 2 + 4 * frac + 1e-9);
    if (frac == 0) {
      EXPECT_LE(std::abs(sum - 4 * bp), 2);
    }
    for (int64_t c : a.caps) EXPECT_GE(c, static_cast<int64_t>(bp * 0.2));
  }
}

TEST(AdaKv, AlphaOneIsUniformSnapKv) {
  const Tensor q = RandomTensor({4, 64, 8}, 1), k = RandomTensor({2, 64, 8}, 2),
               v = RandomTensor({2, 64, 8}, 3);
  AdaKvOptions opt;
  opt.snap.window = 8;
  opt.snap.kernel = 5;
  opt.budget = 20;
  opt.alpha = 1.0;
  TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv c, AdaKvCompress(q, k, v, opt));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor s, SnapKvScores(q, k, opt.snap));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto uniform, SelectKept(s, {12, 12}, 8));
  EXPECT_EQ(c.kept, uniform);
  EXPECT_THAT(c.cu_seqlens, ElementsAre(0, 20, 40));
}

TEST(AdaKv, CompactLayoutOffsetsAndRows) {
  const Tensor q = RandomTensor({2, 40, 4}, 4), k = RandomTensor({2, 40, 4}, 5),
               v = RandomTensor({2, 40, 4}, 6);
  AdaKvOptions opt;
  opt.snap.window = 4;
  opt.budget = 10;
  opt.alpha = 0.2;
  TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv c, AdaKvCompress(q, k, v, opt));
  ASSERT_EQ(c.cu_seqlens.size(), 3u);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(c.cu_seqlens[h + 1] - c.cu_seqlens[h], static_cast<int64_t>(c.kept[h].size()));
    EXPECT_TRUE(std::is_sorted(c.kept[h].begin(), c.kept[h].end()));
    // The window is always kept.
    for (int64_t p = 36; p < 40; ++p) EXPECT_TRUE(std::count(c.kept[h].begin(), c.kept[h].end(), p));
    for (size_t r = 0; r < c.kept[h].size(); ++r) {
      const int64_t row = c.cu_seqlens[h] + static_cast<int64_t>(r), pos = c.kept[h][r];
      for (int ch = 0; ch < 4; ++ch) {
        EXPECT_EQ(c.keys.data()[row * 4 + ch], k.data()[(h * 40 + pos) * 4 + ch]);
        EXPECT_EQ(c.values.data()[row * 4 + ch], v.data()[(h * 40 + pos) * 4 + ch]);
      }
    }
  }
}

// Naive SnapKV scoring in double precision.
std::vector<double> NaiveScores(const Tensor& q, const Tensor& k, const SnapKvOptions& o) {
  const int64_t h = q.dim(0), n = q.dim(1), d = q.dim(2), hkv = k.dim(0), g = h / hkv;
  const int64_t w = o.window, l = n - w;
  std::vector<double> per(h * l, 0.0);
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t i = 0; i < w; ++i) {
      std::vector<double> s(l + i + 1);
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j <= l + i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double{q.data()[(hh * n + l + i) * d + c]} * k.data()[((hh / g) * n + j) * d + c];
        s[j] = dot / std::sqrt(double(d));
        m = std::max(m, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t j = 0; j < l; ++j) per[hh * l + j] += s[j] / sum / w;
    }
  }
  std::vector<double> red(hkv * l), out(hkv * l);
  for (int64_t kv = 0; kv < hkv; ++kv) {
    for (int64_t j = 0; j < l; ++j) {
      double acc = o.gqa == GqaReduce::kMax ? -1e300 : 0;
      for (int64_t gg = 0; gg < g; ++gg) {
        const double x = per[(kv * g + gg) * l + j];
        acc = o.gqa == GqaReduce::kMax ? std::max(acc, x) : acc + x / g;
      }
      red[kv * l + j] = acc;
    }
    for (int64_t j = 0; j < l; ++j) {
      double acc = o.pool == PoolKind::kMax ? -1e300 : 0;
      for (int64_t t = j - o.kernel / 2; t <= j + o.kernel / 2; ++t) {
        if (t < 0 || t >= l) continue;
        acc = o.pool == PoolKind::kMax ? std::max(acc, red[kv * l + t]) : acc + red[kv * l + t] / o.kernel;
      }
      out[kv * l + j] = acc;
    }
  }
  return out;
}

TEST(AdaKv, SnapKvScoresMatchNaiveForAllReductions) {
  const Tensor q = RandomTensor({6, 30, 8}, 7), k = RandomTensor({2, 30, 8}, 8);
  for (GqaReduce r : {GqaReduce::kMean, GqaReduce::kMax}) {
    for (PoolKind p : {PoolKind::kMax, PoolKind::kAvg}) {
      SnapKvOptions o;
      o.window = 6;
      o.kernel = 3;
      o.gqa = r;
      o.pool = p;
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor s, SnapKvScores(q, k, o));
      ASSERT_EQ(s.shape(), (std::vector<int64_t>{2, 24}));
      const std::vector<double> ref = NaiveScores(q, k, o);
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(s.data()[i], ref[i], 1e-6) << i;
    }
  }
}

// Keys given as runs (a KV cache's pages): the same scores bit for bit for
// any split, and from the window alone; runs that leave a gap, overlap or
// come out of order, and a visitor's own error, are refused.
TEST(AdaKv, SnapKvScoresOfRunsEqualTheWholeKeysBitForBit) {
  const int64_t n = 1100, d = 16, w = 9;  // two whole blocks of 512 keys and a tail
  const Tensor q = RandomTensor({6, n, d}, 11), k = RandomTensor({2, n, d}, 12);
  SnapKvOptions o;
  o.window = w;
  o.kernel = 5;
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor whole, SnapKvScores(q, k, o));
  std::vector<float> window_rows;  // q's last w rows of each head: (6, w, d)
  for (int64_t h = 0; h < 6; ++h) {
    const float* from = q.ptr() + (h * n + n - w) * d;
    window_rows.insert(window_rows.end(), from, from + w * d);
  }
  const Tensor window = *Tensor::FromData({6, w, d}, window_rows);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor of_window, SnapKvScores(window, k, o));
  EXPECT_EQ(of_window.data(), whole.data());
  for (const std::vector<int64_t>& splits : {std::vector<int64_t>{1100},
                                             {1, 1099},
                                             {512, 512, 76},
                                             {500, 30, 570},
                                             {1024, 75, 1},
                                             {5, 17, 3, 40, 32, 1003},
                                             {1099, 1},
                                             {600, 100, 100, 300}}) {
    auto runs = [&](int64_t kv, KvRunFn fn) {
      int64_t first = 0;
      for (int64_t count : splits) {
        fn(k.ptr() + (kv * n + first) * d, nullptr, first, count);
        first += count;
      }
      return absl::OkStatus();
    };
    for (const Tensor* query : {&q, &window}) {
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor got, SnapKvScoresOfRuns(*query, 2, n, d, runs, o));
      EXPECT_EQ(got.shape(), whole.shape());
      EXPECT_EQ(got.data(), whole.data()) << "splits of " << splits.size();
    }
  }
  auto bad = [&](std::vector<std::pair<int64_t, int64_t>> pieces) {
    return SnapKvScoresOfRuns(
        q, 2, n, d,
        [&](int64_t kv, KvRunFn fn) {
          for (auto [first, count] : pieces) {
            fn(k.ptr() + (kv * n + first) * d, nullptr, first, count);
          }
          return absl::OkStatus();
        },
        o);
  };
  EXPECT_THAT(bad({{0, 600}}).status(), StatusIs(absl::StatusCode::kInvalidArgument));  // short
  EXPECT_THAT(bad({{0, 600}, {601, 499}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // gap
  EXPECT_THAT(bad({{0, 600}, {590, 510}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // overlap
  EXPECT_THAT(bad({{600, 500}, {0, 600}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // order
  EXPECT_THAT(bad({{0, 600}, {600, 501}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // past N
  EXPECT_THAT(
      SnapKvScoresOfRuns(
          q, 2, n, d, [](int64_t, KvRunFn) { return absl::UnavailableError("pages gone"); }, o)
          .status(),
      StatusIs(absl::StatusCode::kUnavailable));
  // q of neither N nor w rows; a q head count that is no multiple of H_kv.
  EXPECT_THAT(SnapKvScoresOfRuns(
                  RandomTensor({6, 10, d}, 1), 2, n, d,
                  [](int64_t, KvRunFn) { return absl::OkStatus(); }, o)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SnapKvScoresOfRuns(
                  q, 4, n, d, [](int64_t, KvRunFn) { return absl::OkStatus(); }, o)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AdaKv, LargeBudgetKeepsEverything) {
  const Tensor q = RandomTensor({1, 16, 4}, 9), k = RandomTensor({1, 16, 4}, 10);
  AdaKvOptions opt;
  opt.snap.window = 4;
  opt.snap.kernel = 1;
  opt.budget = 100;
  TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv c, AdaKvCompress(q, k, k, opt));
  EXPECT_EQ(c.kept[0].size(), 16u);
}

TEST(AdaKv, CompactDecodeMatchesMaskedAttention) {
  const Tensor q = RandomTensor({4, 48, 8}, 11), k = RandomTensor({2, 48, 8}, 12),
               v = RandomTensor({2, 48, 8}, 13);
  AdaKvOptions opt;
  opt.snap.window = 8;
  opt.budget = 16;
  TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv c, AdaKvCompress(q, k, v, opt));
  const Tensor qd = RandomTensor({4, 8}, 14);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor o, CompactDecodeAttention(qd, c));
  for (int64_t hh = 0; hh < 4; ++hh) {
    const std::set<int64_t> keep(c.kept[hh / 2].begin(), c.kept[hh / 2].end());
    Tensor q1 = *Tensor::FromData({1, 1, 8}, std::vector<float>(qd.data().begin() + hh * 8,
                                                                 qd.data().begin() + hh * 8 + 8));
    Tensor k1 = *Tensor::FromData({1, 48, 8}, std::vector<float>(k.data().begin() + (hh / 2) * 384,
                                                                  k.data().begin() + (hh / 2 + 1) * 384));
    Tensor v1 = *Tensor::FromData({1, 48, 8}, std::vector<float>(v.data().begin() + (hh / 2) * 384,
                                                                  v.data().begin() + (hh / 2 + 1) * 384));
    TANDEM_ASSERT_OK_AND_ASSIGN(
        Tensor ref, MaskedAttentionNaive(q1, k1, v1, [&](int64_t, int64_t j) { return keep.count(j) > 0; }));
    for (int c2 = 0; c2 < 8; ++c2) EXPECT_NEAR(o.data()[hh * 8 + c2], ref.data()[c2], 1e-5);
  }
}

TEST(AdaKv, RejectsBadInputs) {
  const Tensor q = RandomTensor({2, 16, 4}, 1), k = RandomTensor({2, 16, 4}, 2);
  SnapKvOptions o;
  o.window = 16;
  EXPECT_THAT(SnapKvScores(q, k, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.window = 4;
  o.kernel = 4;
  EXPECT_THAT(SnapKvScores(q, k, o), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AllocateBudgets(SpecScores(), 2, 1.5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AllocateBudgets(SpecScores(), -1, 0.2), StatusIs(absl::StatusCode::kInvalidArgument));
  Tensor nan = SpecScores();
  nan.mutable_data()[3] = NAN;
  EXPECT_THAT(AllocateBudgets(nan, 2, 0.2), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SelectKept(SpecScores(), {1, 1}, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SelectKept(SpecScores(), {1, 1, 6}, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CompactKvCache(k, k, {{0, 16}, {1}}), StatusIs(absl::StatusCode::kInvalidArgument));
  AdaKvOptions ao;
  ao.snap.window = 8;
  ao.budget = 4;
  EXPECT_THAT(AdaKvCompress(q, k, k, ao), StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor q3 = RandomTensor({3, 16, 4}, 3);
  EXPECT_THAT(SnapKvScores(q3, k, SnapKvOptions{.window = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels
