// MakePostgresStoreFactory against a real PostgreSQL server started by the
// test (aggregator/store/testing/postgres_server.h).
#include "aggregator/core/postgres_store_factory.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/store/testing/postgres_server.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::PostgresServer;
using ::tandem::aggregator::testing::UniqueName;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PostgresStoreFactoryTest, TasksShareOneDatabaseWithinMaxTasks) {
  ASSERT_TRUE(PostgresStoreBuiltIn());
  TANDEM_ASSERT_OK_AND_ASSIGN(PostgresServer * server, PostgresServer::Shared());
  // A fresh database, also under --gtest_repeat.
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string conninfo,
                              server->CreateDatabase(UniqueName("factory")));
  StoreFactory factory = MakePostgresStoreFactory(conninfo, /*max_tasks=*/2);
  EXPECT_THAT(factory("task-a", false).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no state for task task-a")));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> a, factory("task-a", true));
  ASSERT_THAT(a->OpenRound(1, "params-a"), IsOk());
  ASSERT_THAT(a->PutPending(1, "r1", "share-a"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> b, factory("task-b", true));
  EXPECT_THAT(factory("task-c", true).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_tasks")));
  // A restarted daemon (or another replica) reopens the task and finds its
  // state; the other task does not see it.
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> again, factory("task-a", false));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, again->GetReport("r1"));
  EXPECT_EQ(r.share, "share-a");
  EXPECT_THAT(b->GetReport("r1"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(b->GetRound(1), StatusIs(absl::StatusCode::kNotFound));
}

// Two leader replicas (in process) over one database, one helper: a
// replica that loaded the task before its first round -- its own OpenRound
// was refused by its budget -- finds the round another replica opened on
// its next tick and verifies reports it never received.
TEST(PostgresStoreFactoryTest, AReplicaLoadedBeforeTheFirstRoundFindsItOnItsTick) {
  ASSERT_TRUE(PostgresStoreBuiltIn());
  TANDEM_ASSERT_OK_AND_ASSIGN(PostgresServer * server, PostgresServer::Shared());
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string leader_db,
                              server->CreateDatabase(UniqueName("tick_leader")));
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string helper_db,
                              server->CreateDatabase(UniqueName("tick_helper")));
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> noise = DeterministicRandom::FromSeed(1);
  AggregatorOptions ho;
  ho.role = Role::kHelper;
  ho.policies = testing::PermissiveTestPolicies();
  TANDEM_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Aggregator> helper,
      Aggregator::Create(ho, MakePostgresStoreFactory(helper_db, 0, "h1"), nullptr, &clock,
                         noise.get()));
  InProcessPeerChannel channel(helper.get());
  AggregatorOptions ao;
  ao.policies = testing::PermissiveTestPolicies();
  TANDEM_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Aggregator> a,
      Aggregator::Create(ao, MakePostgresStoreFactory(leader_db, 0, "a"), &channel, &clock,
                         noise.get()));
  AggregatorOptions bo = ao;
  Policy tight = bo.policies.For("tick-task");
  tight.epsilon_budget = 0.01;  // less than one release at z = 1
  bo.policies = PolicySet::Uniform(tight);
  TANDEM_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Aggregator> b,
      Aggregator::Create(bo, MakePostgresStoreFactory(leader_db, 0, "b"), &channel, &clock,
                         noise.get()));

  proto::RoundParameters params = testing::MakeRoundParameters("tick-task", 1, 4, 16, 4);
  const double sensitivity = 16.0 * 65536.0;  // clip_l2_norm * 2^fractional_bits: z = 1
  params.set_noise_variance(sensitivity * sensitivity);
  EXPECT_THAT(b->OpenRound(params), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(a->OpenRound(params), IsOk());
  ASSERT_THAT(helper->OpenRound(params), IsOk());
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    TANDEM_ASSERT_OK_AND_ASSIGN(testing::TestReport r, testing::MakeReport(params, seed));
    ASSERT_THAT(a->Upload(r.to_leader).status(), IsOk());
    ASSERT_THAT(helper->Upload(r.to_helper).status(), IsOk());
  }
  EXPECT_THAT(b->ProcessPending("tick-task"), ::tandem::testing::IsOkAndHolds(3));
  proto::AggregatorStatusRequest status;
  status.set_task_id("tick-task");
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::AggregatorStatusResponse s, b->Status(status));
  EXPECT_EQ(s.open_round(), 1u);
  EXPECT_EQ(s.accepted_reports(), 3u);
}

TEST(PostgresStoreFactoryTest, AnUnreachableServerIsUnavailable) {
  StoreFactory factory =
      MakePostgresStoreFactory("host=127.0.0.1 port=1 dbname=none connect_timeout=2");
  EXPECT_THAT(factory("task-a", true).status(), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace tandem::aggregator
