#include "ml/data/partition.h"

#include <algorithm>
#include <set>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/data/dataset.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

void ExpectExactCover(const Partition& p, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& c : p) {
    for (int64_t i : c) ++seen[i];
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "index " << i;
}

TEST(PartitionIid, CoversEverySampleOnceBalancedAndDeterministic) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition p, PartitionIid(103, 10, 5));
  ExpectExactCover(p, 103);
  for (const auto& c : p) EXPECT_TRUE(c.size() == 10 || c.size() == 11);
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition q, PartitionIid(103, 10, 5));
  EXPECT_EQ(p, q);
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition r, PartitionIid(103, 10, 6));
  EXPECT_NE(p, r);
  EXPECT_THAT(PartitionIid(3, 4, 1), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PartitionDirichlet, SkewGrowsAsAlphaShrinks) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset d, LoadDigitsCsv());
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition iid, PartitionIid(d.size(), 20, 1));
  EXPECT_LT(MeanLabelTotalVariation(iid, d.labels, 10), 0.2);
  double prev = 0.0;
  for (double alpha : {100.0, 1.0, 0.1}) {
    SCOPED_TRACE(alpha);
    TANDEM_ASSERT_OK_AND_ASSIGN(Partition p, PartitionDirichlet(d.labels, 10, 20, alpha, 7));
    ExpectExactCover(p, d.size());
    const double tv = MeanLabelTotalVariation(p, d.labels, 10);
    EXPECT_GT(tv, prev);
    prev = tv;
    TANDEM_ASSERT_OK_AND_ASSIGN(Partition again, PartitionDirichlet(d.labels, 10, 20, alpha, 7));
    EXPECT_EQ(p, again);
  }
  // alpha = 0.1: most clients are dominated by one or two classes.
  EXPECT_GT(prev, 0.6);
}

TEST(PartitionDirichlet, MinimumSizeAndValidation) {
  std::vector<int> labels(200);
  for (int i = 0; i < 200; ++i) labels[i] = i % 4;
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition p, PartitionDirichlet(labels, 4, 5, 0.5, 3, 10));
  for (const auto& c : p) EXPECT_GE(c.size(), 10u);
  EXPECT_THAT(PartitionDirichlet(labels, 4, 5, 0.0, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PartitionDirichlet(labels, 3, 5, 1.0, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PartitionDirichlet(labels, 4, 5, 1.0, 3, 100),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(PartitionByGroup, OneClientPerGroupInIdOrder) {
  const std::vector<int> groups = {7, 2, 7, 2, 9};
  TANDEM_ASSERT_OK_AND_ASSIGN(Partition p, PartitionByGroup(groups));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(p[1], (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(p[2], (std::vector<int64_t>{4}));
  EXPECT_THAT(PartitionByGroup(std::vector<int>{1, -1}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PartitionByGroup({}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
