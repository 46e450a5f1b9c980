// Several tandem-aggregator processes per operator over one PostgreSQL
// database each (issue 24): the leader's replicas and the helper's replicas
// as real daemons on loopback (aggregator_replicas_fixture.h). Uploads go to
// any replica; verification runs as leased batches; the partial
// accumulators are summed and noised once at Finalize, on any replica. The
// fault: a leader replica SIGKILLed while it holds a lease (and accepted
// reports it had not yet saved). The attack on the privacy budget is in
// aggregator_replicas_attack_test.cc (label adversarial).
#include <csignal>

#include "tests/integration/aggregator_replicas_fixture.h"

namespace tandem::replicas_testing {
namespace {

TEST_F(AggregatorReplicasTest, AnyReplicaTakesUploadsAndAnyReplicaReleasesTheOneSum) {
  DaemonProcess* h1 = Start("helper", "h1", nullptr);
  DaemonProcess* h2 = Start("helper", "h2", nullptr);
  ASSERT_TRUE(h1 != nullptr && h2 != nullptr);
  // Each leader replica keeps its own (sticky) channel to one helper replica.
  DaemonProcess* l1 = Start("leader", "l1", h1);
  DaemonProcess* l2 = Start("leader", "l2", h2);
  ASSERT_TRUE(l1 != nullptr && l2 != nullptr);
  const Endpoint leaders[2] = {Connect(l1), Connect(l2)};
  const Endpoint helpers[2] = {Connect(h1), Connect(h2)};
  // The coordinator opens the round through one replica of each operator.
  TANDEM_ASSERT_OK(leaders[0].Open(params_));
  TANDEM_ASSERT_OK(helpers[0].Open(params_));
  std::vector<uint64_t> expected;
  constexpr int kReports = 40;
  for (int i = 0; i < kReports; ++i) {
    Upload(static_cast<uint64_t>(i + 1), leaders[i % 2], helpers[(i / 2) % 2], expected);
  }
  ASSERT_TRUE(WaitFor([&] { return NonePending(leaders[0]); }, absl::Seconds(30)));
  // Idle replicas save their partials: nothing accepted is left for the
  // finalizing replica to expand again, and the partials already hold all.
  for (const std::string* db : {&leader_db_, &helper_db_}) {
    EXPECT_TRUE(WaitFor(
        [&] {
          return Sql("SELECT count(*) FROM tandem_reports WHERE state = 1 AND NOT counted", *db) ==
                 "0";
        },
        absl::Seconds(15)))
        << *db;
    EXPECT_EQ(Sql("SELECT sum(report_count) FROM tandem_partials", *db), "40") << *db;
  }

  // Finalized through the other replicas than those that opened the round.
  auto a = leaders[1].Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(a, IsOk());
  auto b = helpers[1].Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), static_cast<uint64_t>(kReports));
  EXPECT_EQ(b->accepted_reports(), static_cast<uint64_t>(kReports));
  auto sum = SumShares(*a, *b);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);
  // One release per operator: a retry on another replica returns it.
  auto again = leaders[0].Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->aggregate_share().data(), a->aggregate_share().data());
  EXPECT_EQ(again->accepted_reports(), a->accepted_reports());
  // Every report counted once, in exactly one partial.
  EXPECT_EQ(Sql("SELECT count(*) FILTER (WHERE counted) FROM tandem_reports", leader_db_), "40");
  EXPECT_EQ(Sql("SELECT sum(report_count) FROM tandem_partials", leader_db_), "40");
  EXPECT_EQ(Sql("SELECT sum(report_count) FROM tandem_partials", helper_db_), "40");
}

TEST_F(AggregatorReplicasTest, AReplicaKilledHoldingALeaseLosesNothingAndCountsNothingTwice) {
  // No idle checkpoints: the killed replica still holds accepted reports it
  // has not saved, which the finalizing replica must adopt.
  idle_checkpoint_ms_ = -1;
  DaemonProcess* h1 = Start("helper", "h1", nullptr);
  DaemonProcess* h2 = Start("helper", "h2", nullptr);
  ASSERT_TRUE(h1 != nullptr && h2 != nullptr);
  DaemonProcess* l1 = Start("leader", "l1", h1);
  ASSERT_NE(l1, nullptr);
  const Endpoint leader1 = Connect(l1), helper1 = Connect(h1), helper2 = Connect(h2);
  TANDEM_ASSERT_OK(leader1.Open(params_));
  TANDEM_ASSERT_OK(helper1.Open(params_));
  std::vector<uint64_t> expected;
  uint64_t seed = 1;

  // 1. Ten reports verified by l1 and h1, accepted but not yet counted in a
  //    saved partial (the checkpoint comes every 512 reports).
  for (int i = 0; i < 10; ++i) Upload(seed++, leader1, helper1, expected);
  ASSERT_TRUE(WaitFor([&] { return NonePending(leader1); }, absl::Seconds(30)));
  EXPECT_EQ(Sql("SELECT count(*) FROM tandem_reports WHERE state = 1 AND NOT counted AND "
                "owner = 'l1'",
                leader_db_),
            "10");
  EXPECT_EQ(Sql("SELECT count(*) FROM tandem_reports WHERE state = 1 AND NOT counted AND "
                "owner = 'h1'",
                helper_db_),
            "10");

  // 2. l1's helper stops answering; l1 leases the next batch and waits in
  //    Verify, holding the lease, when it is SIGKILLed.
  ASSERT_EQ(kill(h1->pid(), SIGSTOP), 0);
  for (int i = 0; i < 10; ++i) Upload(seed++, leader1, helper2, expected);
  // (Its first claim may hold only the uploads that had arrived; it is
  // stuck in that batch's Verify, so the rest stay free.)
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string n =
            Sql("SELECT count(*) FROM tandem_reports WHERE state = 0 AND owner = 'l1'", leader_db_);
        return n != "0" && n != "<error>";
      },
      absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));  // the other uploads land
  l1->Kill();
  ASSERT_EQ(kill(h1->pid(), SIGCONT), 0);
  const std::string expiry =
      Sql("SELECT max(lease_expires) FROM tandem_reports WHERE state = 0", leader_db_);

  // 3. Another leader replica: the batch is not its until the lease expires.
  DaemonProcess* l2 = Start("leader", "l2", h2);
  ASSERT_NE(l2, nullptr);
  const Endpoint leader2 = Connect(l2);
  auto status = leader2.Status(params_.task_id());  // loads the task
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(status->pending_reports(), 10u);  // every acknowledged upload is there
  ASSERT_TRUE(WaitFor([&] { return NonePending(leader2); }, absl::Seconds(kLeaseMs / 1000 + 20)));
  EXPECT_EQ(Sql("SELECT now() >= '" + expiry + "'::timestamptz", leader_db_), "t")
      << "a replica took a batch whose lease had not expired";

  // 4. More uploads through the new replica, then the release through
  //    replicas that did not open the round: l2 adopts l1's ten uncounted
  //    reports, h2 adopts h1's.
  for (int i = 0; i < 5; ++i) Upload(seed++, leader2, helper2, expected);
  ASSERT_TRUE(WaitFor([&] { return NonePending(leader2); }, absl::Seconds(30)));
  auto a = leader2.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(a, IsOk());
  auto b = helper2.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), 25u);
  EXPECT_EQ(b->accepted_reports(), 25u);
  auto sum = SumShares(*a, *b);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);  // nothing lost, nothing counted twice
  EXPECT_EQ(Sql("SELECT count(*) FROM tandem_reports WHERE counted", leader_db_), "25");
  EXPECT_EQ(Sql("SELECT count(*) FROM tandem_reports WHERE counted", helper_db_), "25");
  // h1 was paused through all of this; its stale view learns the release.
  auto late = helper1.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(late, IsOk());
  EXPECT_EQ(late->aggregate_share().data(), b->aggregate_share().data());
}

}  // namespace
}  // namespace tandem::replicas_testing
