// Property tests of the retry-free partitioners: every sample used at most
// once, sizes as specified (minimum, total, skew), label skew falling with
// alpha, deterministic per seed, and the scales where PartitionDirichlet's
// redraws give up (thousands of clients).
#include "ml/data/scalable_partition.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

// Fashion-MNIST-sized labels: 60,000 samples, 10 balanced classes, shuffled.
std::vector<int> Labels(int64_t n = 60000, int classes = 10) {
  std::vector<int> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int>(i % classes);
  std::mt19937_64 gen(3);
  std::shuffle(labels.begin(), labels.end(), gen);
  return labels;
}

// Every index in [0, n) at most once; returns how many were used.
int64_t ExpectDisjoint(const Partition& p, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  int64_t used = 0;
  for (const auto& c : p) {
    for (int64_t i : c) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
      if (i < 0 || i >= n) continue;
      EXPECT_EQ(++seen[i], 1) << "index " << i << " dealt twice";
      ++used;
    }
  }
  return used;
}

TEST(DrawClientSizes, MinimumTotalAndSkewHold) {
  ClientSizes s{.min_per_client = 10, .size_sigma = 1.5, .fill = 1.0};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> sizes, DrawClientSizes(60000, 3000, s, 1));
  ASSERT_EQ(sizes.size(), 3000u);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), 60000);
  EXPECT_GE(*std::min_element(sizes.begin(), sizes.end()), 10);
  // Heavy tail: the largest client holds many times the median one.
  std::vector<int64_t> sorted = sizes;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_GT(sorted.back(), 4 * sorted[sorted.size() / 2]);
  // sigma = 0: equal sizes (within one); fill = 0.5: half the data.
  ClientSizes equal{.min_per_client = 0, .size_sigma = 0.0, .fill = 0.5};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int64_t> e, DrawClientSizes(1001, 10, equal, 1));
  EXPECT_EQ(std::accumulate(e.begin(), e.end(), int64_t{0}), 500);
  EXPECT_LE(*std::max_element(e.begin(), e.end()) - *std::min_element(e.begin(), e.end()), 1);
}

TEST(DrawClientSizes, BadArgumentsAreRefused) {
  EXPECT_THAT(DrawClientSizes(100, 0, {}, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DrawClientSizes(100, 5, {.min_per_client = 1, .size_sigma = -1}, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DrawClientSizes(100, 5, {.min_per_client = 1, .size_sigma = 0, .fill = 0}, 1)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DrawClientSizes(100, 11, {.min_per_client = 10}, 1).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// The scales of the issue: 1,000 / 3,000 / 10,000 clients at alpha = 0.3
// with a minimum of 10 (1 for 10,000: 60,000 / 10,000 = 6 per client).
TEST(PartitionDirichletMixture, ScalesToThousandsOfClientsWithoutRetries) {
  const std::vector<int> labels = Labels();
  for (auto [clients, min] : {std::pair{1000, 10}, {3000, 10}, {10000, 1}}) {
    ClientSizes s{.min_per_client = min, .size_sigma = 1.0, .fill = 1.0};
    TANDEM_ASSERT_OK_AND_ASSIGN(Partition p,
                                PartitionDirichletMixture(labels, 10, clients, 0.3, s, 7));
    ASSERT_EQ(p.size(), static_cast<size_t>(clients));
    EXPECT_EQ(ExpectDisjoint(p, 60000), 60000);
    for (const auto& c : p) ASSERT_GE(static_cast<int64_t>(c.size()), min);
    for (const auto& c : p) ASSERT_TRUE(std::is_sorted(c.begin(), c.end()));
  }
}

TEST(PartitionDirichletMixture, SkewFallsWithAlphaAndDrawsAreDeterministic) {
  const std::vector<int> labels = Labels();
  ClientSizes s{.min_per_client = 20, .size_sigma = 0.5, .fill = 0.5};
  double previous = 1.0;
  for (double alpha : {0.05, 0.5, 5.0, 500.0}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(Partition p,
                                PartitionDirichletMixture(labels, 10, 500, alpha, s, 11));
    EXPECT_EQ(ExpectDisjoint(p, 60000), 30000);
    const double tv = MeanLabelTotalVariation(p, labels, 10);
    EXPECT_LT(tv, previous) << "alpha " << alpha;
    previous = tv;
  }
  EXPECT_LT(previous, 0.25);  // near IID at alpha = 500 (60 samples per client)
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition a, PartitionDirichletMixture(labels, 10, 200, 0.1, s, 5));
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition b, PartitionDirichletMixture(labels, 10, 200, 0.1, s, 5));
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition c, PartitionDirichletMixture(labels, 10, 200, 0.1, s, 6));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Strong skew: at alpha = 0.1 most clients are dominated by one class.
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition d,
                              PartitionDirichletMixture(labels, 10, 200, 0.1, s, 5));
  EXPECT_GT(MeanLabelTotalVariation(d, labels, 10), 0.6);
}

TEST(PartitionDirichletMixture, BadInputIsRefused) {
  const std::vector<int> labels = {0, 1, 2, 5};
  EXPECT_THAT(PartitionDirichletMixture(labels, 3, 2, 0.5, {}, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PartitionDirichletMixture(Labels(40, 2), 2, 2, 0.0, {}, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PartitionDirichletMixture(Labels(40, 2), 2, 5, 1.0, {.min_per_client = 9}, 1)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(PartitionQuantitySkew, SizesSkewedLabelsNot) {
  const std::vector<int> labels = Labels();
  ClientSizes s{.min_per_client = 5, .size_sigma = 2.0, .fill = 1.0};
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition p, PartitionQuantitySkew(60000, 100, s, 9));
  EXPECT_EQ(ExpectDisjoint(p, 60000), 60000);
  size_t largest = 0, smallest = 60000;
  for (const auto& c : p) {
    largest = std::max(largest, c.size());
    smallest = std::min(smallest, c.size());
  }
  EXPECT_GE(smallest, 5u);
  EXPECT_GT(largest, 20 * smallest);
  // The big clients look like the population (IID labels).
  Partition big;
  for (const auto& c : p) {
    if (c.size() >= 2000) big.push_back(c);
  }
  ASSERT_FALSE(big.empty());
  EXPECT_LT(MeanLabelTotalVariation(big, labels, 10), 0.05);
}

}  // namespace
}  // namespace tandem::ml
