// ClientShards: the simulated clients' data as index ranges into one shared
// training set (federation.h), so 10,000+ clients cost 8 bytes per sample.
#include <cstdint>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/data/dataset.h"
#include "server/sim/federation.h"

namespace tandem::sim {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;

TEST(ClientShards, RowsAreThePartitionInOrder) {
  const ml::Partition p = {{4, 0}, {2}, {1, 3, 5}};
  TANDEM_ASSERT_OK_AND_ASSIGN(ClientShards s, ClientShards::Create(p, 6));
  ASSERT_EQ(s.clients(), 3);
  EXPECT_THAT(s.rows(0), ElementsAre(4, 0));
  EXPECT_THAT(s.rows(1), ElementsAre(2));
  EXPECT_THAT(s.rows(2), ElementsAre(1, 3, 5));
  // 6 rows + 4 offsets, 8 bytes each (capacity may round up, never down).
  EXPECT_GE(s.bytes(), 10 * sizeof(int64_t));
  EXPECT_LE(s.bytes(), 20 * sizeof(int64_t));
}

TEST(ClientShards, RefusesBadPartitions) {
  EXPECT_THAT(ClientShards::Create({}, 4).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ClientShards::Create({{0}, {}}, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // an empty client
  EXPECT_THAT(ClientShards::Create({{0, 1}, {1}}, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // sample used twice
  EXPECT_THAT(ClientShards::Create({{0, 4}}, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // out of range
  EXPECT_THAT(ClientShards::Create({{-1}}, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClientShards, TenThousandClientsCostEightBytesPerSample) {
  // 60,000 samples (Fashion-MNIST's training set size) over 10,000 clients
  // of the default mixture split: the index is ~0.5 MB, not 60,000 copied
  // images (188 MB as float rows).
  ml::Dataset train;
  train.num_classes = 10;
  train.features.resize(60000, 1);
  train.labels.resize(60000);
  for (int64_t i = 0; i < 60000; ++i) train.labels[i] = static_cast<int>(i % 10);
  FederationOptions o;
  o.clients = 10000;
  o.dirichlet_alpha = 0.3;
  TANDEM_ASSERT_OK_AND_ASSIGN(ClientShards s, ShardClients(o, train));
  ASSERT_EQ(s.clients(), 10000);
  int64_t total = 0;
  for (int c = 0; c < s.clients(); ++c) {
    ASSERT_FALSE(s.rows(c).empty()) << c;
    total += static_cast<int64_t>(s.rows(c).size());
  }
  EXPECT_LE(total, 60000);
  EXPECT_LE(s.bytes(), static_cast<size_t>(60000 + 10001) * sizeof(int64_t) * 2);
}

}  // namespace
}  // namespace tandem::sim
