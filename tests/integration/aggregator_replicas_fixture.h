// The fixture of the replica tests (aggregator_replicas_test.cc,
// aggregator_replicas_attack_test.cc): N tandem-aggregator processes per
// operator on loopback, each operator's database on a real PostgreSQL server
// started by the test (aggregator/store/testing/postgres_server.h). Test-only.
#ifndef TANDEM_TESTS_INTEGRATION_AGGREGATOR_REPLICAS_FIXTURE_H_
#define TANDEM_TESTS_INTEGRATION_AGGREGATOR_REPLICAS_FIXTURE_H_

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

namespace tandem::replicas_testing {

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
        "--allow_unprovisioned_tasks",
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

}  // namespace tandem::replicas_testing

#endif  // TANDEM_TESTS_INTEGRATION_AGGREGATOR_REPLICAS_FIXTURE_H_
