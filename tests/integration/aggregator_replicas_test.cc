// Several tandem-aggregator processes per operator over one PostgreSQL
// database each (issue 24): the leader's replicas and the helper's replicas
// as real daemons on loopback, each operator's database in a real
// PostgreSQL server started by the test. Uploads go to any replica;
// verification runs as leased batches; the partial accumulators are summed
// and noised once at Finalize, on any replica. Attacks and faults: a leader
// replica SIGKILLed while it holds a lease (and accepted reports it had not
// yet counted), and a coordinator that tries to spend more privacy budget
// by opening the next round through another replica.
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "aggregator/store/testing/postgres_server.h"
#include "aggregator/testing/report_factory.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::AddInto;
using aggregator::testing::MakeReport;
using aggregator::testing::MakeRoundParameters;
using aggregator::testing::PostgresServer;
using aggregator::testing::SumShares;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;
using ::tandem::testing::StatusIs;

using Endpoint = tandem::testing::AggregatorEndpoint;

constexpr int kLeaseMs = 4000;

class AggregatorReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = PostgresServer::Shared();
    ASSERT_THAT(server.status(), IsOk());
    pg_ = *server;
    // Each operator its own database (non-collusion: never one for both).
    leader_db_ = aggregator::testing::UniqueName("replicas_leader");
    helper_db_ = aggregator::testing::UniqueName("replicas_helper");
    ASSERT_THAT(pg_->CreateDatabase(leader_db_).status(), IsOk());
    ASSERT_THAT(pg_->CreateDatabase(helper_db_).status(), IsOk());
    dir_ = tandem::testing::MakeTempDir("tandem-replicas");
    ASSERT_FALSE(dir_.empty());
    params_ = MakeRoundParameters("fl-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                  /*num_groups=*/4);
  }
  void TearDown() override {
    procs_.clear();
    if (getenv("TANDEM_KEEP_TEST_DIR") == nullptr) std::filesystem::remove_all(dir_);
  }

  // Starts replica `id` of `role` (a leader's peer is helper replica `peer`).
  DaemonProcess* Start(const std::string& role, const std::string& id, DaemonProcess* peer,
                       const std::string& policy = testing::kPermissiveTestPolicy) {
    std::ofstream(dir_ + "/replica.textproto")
        << "lease_ms: " << kLeaseMs << "\nidle_checkpoint_ms: " << idle_checkpoint_ms_ << "\n";
    std::vector<std::string> args = {
        "--role=" + role,
        "--listen=127.0.0.1:0",
        "--state_dir=" + dir_ + "/" + id,
        "--insecure_plaintext",
        "--allow_unticketed_uploads",
        "--policy=" + policy,
        "--config=" + dir_ + "/replica.textproto",
        "--postgres_conninfo=" + pg_->ConninfoFor(role == "leader" ? leader_db_ : helper_db_),
        "--replica_id=" + id};
    if (peer != nullptr) args.push_back("--peer=" + Loopback(peer->port()));
    auto p = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, args, dir_ + "/" + id + ".log");
    EXPECT_THAT(p.status(), IsOk());
    if (!p.ok()) return nullptr;
    procs_[id] = *std::move(p);
    return procs_[id].get();
  }

  Endpoint Connect(const DaemonProcess* p) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    auto channel =
        grpc::CreateCustomChannel(Loopback(p->port()), grpc::InsecureChannelCredentials(), args);
    return {proto::AggregatorUpload::NewStub(channel),
            proto::AggregatorCollector::NewStub(channel)};
  }

  std::string Sql(const std::string& sql, const std::string& db) {
    auto r = pg_->Query(sql, db);
    EXPECT_THAT(r.status(), IsOk()) << sql;
    return r.ok() ? *r : "<error>";
  }

  // Polls `done` every 50 ms for up to `timeout`.
  static bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return done();
  }

  bool NonePending(const Endpoint& leader) {
    auto s = leader.Status(params_.task_id());
    return s.ok() && s->pending_reports() == 0;
  }

  // Uploads report `seed`'s shares to `leader` and `helper`, adding it to
  // `expected`.
  void Upload(uint64_t seed, const Endpoint& leader, const Endpoint& helper,
              std::vector<uint64_t>& expected) {
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(leader.Upload(r->to_leader));
    TANDEM_ASSERT_OK(helper.Upload(r->to_helper));
    AddInto(expected, r->dense);
  }

  PostgresServer* pg_ = nullptr;
  // The replicas' idle checkpoints (AggregatorConfig): 0 = default (1 s),
  // -1 = never.
  int idle_checkpoint_ms_ = 0;
  std::string leader_db_, helper_db_, dir_;
  proto::RoundParameters params_;
  std::map<std::string, std::unique_ptr<DaemonProcess>> procs_;
};

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

TEST_F(AggregatorReplicasTest, AnotherReplicaDoesNotResetThePrivacyBudget) {
  // z = 1 (noise_variance = sensitivity^2): one release fits a budget of 6
  // at delta 1e-5, two do not (the single-process case: adversarial_test).
  const std::string policy =
      "min_noise_multiplier: 1 min_batch_size: 1 require_norm_proofs: false epsilon_budget: 6";
  DaemonProcess* h1 = Start("helper", "h1", nullptr, policy);
  DaemonProcess* l1 = Start("leader", "l1", h1, policy);
  DaemonProcess* l2 = Start("leader", "l2", h1, policy);
  ASSERT_TRUE(h1 != nullptr && l1 != nullptr && l2 != nullptr);
  const Endpoint leader1 = Connect(l1), leader2 = Connect(l2), helper = Connect(h1);
  const double sensitivity = 16.0 * 65536.0;  // clip_l2_norm * 2^fractional_bits
  params_.set_noise_variance(sensitivity * sensitivity);
  TANDEM_ASSERT_OK(leader1.Open(params_));
  TANDEM_ASSERT_OK(helper.Open(params_));
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 3; ++seed) Upload(seed, leader1, helper, expected);
  ASSERT_TRUE(WaitFor([&] { return NonePending(leader1); }, absl::Seconds(30)));
  ASSERT_THAT(leader1.Finalize(params_.task_id(), 1), IsOk());
  ASSERT_THAT(helper.Finalize(params_.task_id(), 1), IsOk());
  // l2 never saw round 1 released: it reads the spent budget from the
  // database and refuses round 2 like l1 does.
  params_.set_round_id(2);
  EXPECT_THAT(leader2.Open(params_), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(leader1.Open(params_), StatusIs(absl::StatusCode::kFailedPrecondition));
  auto s = leader2.Status(params_.task_id());
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->released_rounds(), 1u);
  EXPECT_GT(s->epsilon_spent(), 0);
}

}  // namespace
}  // namespace tandem
