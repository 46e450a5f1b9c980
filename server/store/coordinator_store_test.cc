#include "server/store/coordinator_store.h"

#include <filesystem>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;

std::string TempDb(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("coordinator_store_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return (dir / "c.db").string();
}

TEST(CoordinatorStore, RoundLifecycleSurvivesReopen) {
  const std::string path = TempDb("lifecycle");
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto s, CoordinatorStore::Open(path));
    TANDEM_ASSERT_OK(s->PutMeta("k", std::string("\0\1", 2)));
    TANDEM_ASSERT_OK(s->BeginRound({1, 1, 100, 200}));
    EXPECT_THAT(s->BeginRound({2, 1, 100, 200}), StatusIs(absl::StatusCode::kFailedPrecondition));
    TANDEM_ASSERT_OK(s->PutAssignment(1, "a"));
    TANDEM_ASSERT_OK(s->PutAssignment(1, "a"));  // idempotent
    TANDEM_ASSERT_OK(s->PutAssignment(1, "b"));
    TANDEM_ASSERT_OK(s->MarkDone(1, "a", std::string(16, 'x'), 99));
    TANDEM_ASSERT_OK(s->MarkDone(1, "a", std::string(16, 'x'), 99));  // a retry
    EXPECT_THAT(s->MarkDone(1, "a", std::string(16, 'y'), 99),
                StatusIs(absl::StatusCode::kAlreadyExists));
    EXPECT_THAT(s->MarkDone(1, "zz", std::string(16, 'x'), 1),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(s->PutAssignment(7, "a"), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, CoordinatorStore::Open(path));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto meta, s->GetMeta("k"));
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(*meta, std::string("\0\1", 2));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto open, s->LoadOpenRound());
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->aggregation_round, 1u);
  EXPECT_EQ(open->deadline_unix_ms, 200);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto assigned, s->LoadAssignments(1));
  ASSERT_EQ(assigned.size(), 2u);
  EXPECT_TRUE(assigned[0].done);
  EXPECT_EQ(assigned[0].bytes_up, 99u);
  EXPECT_FALSE(assigned[1].done);

  proto::TaskCheckpoint cp;
  cp.set_completed_rounds(1);
  cp.add_params(0.5f);
  proto::RoundSummary sum;
  sum.set_model_version(1);
  sum.set_accuracy(0.75);
  TANDEM_ASSERT_OK(s->FinishRound(1, cp, sum));
  EXPECT_THAT(s->FinishRound(1, cp, sum), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s->MarkDone(1, "b", std::string(16, 'x'), 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));  // round closed
  EXPECT_THAT(s->BeginRound({1, 2, 300, 400}), StatusIs(absl::StatusCode::kFailedPrecondition));
  TANDEM_ASSERT_OK(s->BeginRound({2, 2, 300, 400}));
  TANDEM_ASSERT_OK(s->AbandonRound(2, cp));
  TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t last, s->LastAggregationRound());
  EXPECT_EQ(last, 2u);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto none, s->LoadOpenRound());
  EXPECT_FALSE(none.has_value());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto history, s->LoadHistory());
  ASSERT_EQ(history.size(), 1u);  // the abandoned round released nothing
  EXPECT_EQ(history[0].accuracy(), 0.75);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto loaded, s->LoadCheckpoint());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->completed_rounds(), 1u);
  EXPECT_EQ(loaded->params(0), 0.5f);
}

}  // namespace
}  // namespace tandem::server
