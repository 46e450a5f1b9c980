// The fixture of the federation tests: every party as a deployment runs it
// (TLS everywhere, the aggregators' collector and peer APIs on their own
// mutual-TLS ports checked by identity, coordinator-signed upload tickets,
// norm proofs, the coordinator's task provisioned on both aggregators,
// enrolled devices, clients that pin both aggregators), as real processes
// on loopback. Test-only.
#ifndef TANDEM_TESTS_INTEGRATION_FEDERATION_FIXTURE_H_
#define TANDEM_TESTS_INTEGRATION_FEDERATION_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/enrollment.h"

namespace tandem::testing {

// Every party as a deployment runs it: TLS everywhere, the aggregators'
// collector and peer APIs on their own mutual-TLS ports checked by
// identity, coordinator-signed upload tickets, norm proofs, clients that
// pin both aggregators. DP is off (an explicit policy of both servers) so
// that the accuracy can be compared with plain FedAvg.
class FederationFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tandem_federation");
    ASSERT_TRUE(MakeRoleCertificates(dir_).ok());
    AggregatorPairOptions o;
    o.certs_dir = dir_;
    o.ticket_public_key = dir_ + "/ticket.pub";
    o.policy = "min_noise_multiplier: 0 min_batch_size: 1 epsilon_budget: inf";
    o.tasks = ProvisionedTasks();  // as in a deployment
    CustomizePair(o);
    auto pair = StartAggregatorPair(TANDEM_AGGREGATOR_BIN, dir_ + "/aggregators", o);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = *std::move(pair);
    port_ = FreePort();
    admin_port_ = FreePort();
    // Devices enroll with single-use tokens of this operator key.
    ASSERT_TRUE(EnsureEnrollmentKey(dir_).ok());
  }
  // The tasks both aggregators' operators provision.
  virtual std::vector<std::string> ProvisionedTasks() { return {"default"}; }
  // Last changes to the aggregators' options before they start (the fault
  // tests: their clocks, the link between them).
  virtual void CustomizePair(AggregatorPairOptions& options) {}
  void TearDown() override {
    clients_.clear();
    coordinator_.reset();
    pair_.leader.reset();
    pair_.helper.reset();
    std::filesystem::remove_all(dir_);
  }
  // The coordinator's deployment flags (listeners, aggregators, TLS, ticket
  // key, state, enrollment), without any that defines the task.
  std::vector<std::string> DaemonArgs() {
    return {absl::StrCat("--listen=127.0.0.1:", port_),
            "--leader=" + pair_.leader_collector_address(),
            "--helper=" + pair_.helper_collector_address(),
            "--announce_leader=" + pair_.leader_address(),
            "--announce_helper=" + pair_.helper_address(),
            "--tls_cert=" + dir_ + "/coordinator.pem",
            "--tls_key=" + dir_ + "/coordinator.key",
            "--tls_ca=" + dir_ + "/ca.pem",
            "--ticket_key=" + dir_ + "/ticket.key",
            "--state_dir=" + dir_ + "/coordinator",
            "--metrics_port=0",
            "--enrollment_keys=" + dir_ + "/enroll.pub",
            absl::StrCat("--admin_listen=127.0.0.1:", admin_port_),
            "--admin_identities=operator.tandem"};
  }
  // DaemonArgs and the test task (a digits MLP, DP off), then `extra`.
  std::vector<std::string> CoordinatorArgs(const std::vector<std::string>& extra) {
    std::vector<std::string> a = DaemonArgs();
    for (const char* f :
         {"--dataset=digits", "--hidden=32", "--sample_rate=1", "--noise_multiplier=0",
          "--min_batch_size=1", "--block_size=64", "--log_blocks_per_group=1", "--clip=4",
          "--local_steps=20", "--client_lr=0.05"}) {
      a.push_back(f);
    }
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  void StartCoordinator(const std::vector<std::string>& extra) {
    StartCoordinatorWith(CoordinatorArgs(extra));
  }
  void StartCoordinatorWith(const std::vector<std::string>& args) {
    const Command command = WithEnv(coordinator_env_, TANDEM_COORDINATOR_BIN, args);
    auto c = DaemonProcess::Start(command.binary, command.args, dir_ + "/coordinator.log");
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    std::ifstream in(dir_ + "/ca.pem");
    grpc::SslCredentialsOptions o;
    o.pem_root_certs.assign(std::istreambuf_iterator<char>(in), {});
    stub_ = proto::Coordinator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::SslCredentials(o)));
    // The operator's view (mutual TLS to the admin listener).
    o.pem_cert_chain = ReadAll(dir_ + "/operator.pem");
    o.pem_private_key = ReadAll(dir_ + "/operator.key");
    admin_channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", admin_port_), grpc::SslCredentials(o));
    admin_stub_ = proto::CoordinatorAdmin::NewStub(admin_channel_);
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A tandem-client process on shard `shard` of the digits training split;
  // `task` names its task (empty: any task the coordinator offers); `extra`
  // flags come last (they override the ones above).
  void StartClient(int shard, int num_shards, const std::string& task = "",
                   const std::vector<std::string>& extra = {}) {
    const std::string id = absl::StrCat("client", shard, task.empty() ? "" : "-", task);
    std::vector<std::string> args = {absl::StrCat("--coordinator=127.0.0.1:", port_),
                                     "--client_id=" + id,
                                     "--dataset=digits",
                                     absl::StrCat("--shard=", shard),
                                     absl::StrCat("--num_shards=", num_shards),
                                     "--state_dir=" + dir_ + "/" + id,
                                     "--max_errors=200",
                                     absl::StrCat("--seed=", shard + 1),
                                     "--tls_ca=" + dir_ + "/ca.pem",
                                     "--leader=" + pair_.leader_address(),
                                     "--leader_name=leader.tandem",
                                     "--helper=" + pair_.helper_address(),
                                     "--helper_name=helper.tandem"};
    if (!task.empty()) args.push_back("--task_id=" + task);
    absl::StatusOr<std::string> token = WriteEnrollmentToken(dir_, dir_ + "/" + id + ".token");
    ASSERT_TRUE(token.ok()) << token.status();
    args.push_back("--enrollment_token_file=" + *token);
    args.insert(args.end(), extra.begin(), extra.end());
    const Command command = WithEnv(client_env_, TANDEM_CLIENT_BIN, std::move(args));
    auto p = ChildProcess::Spawn(command.binary, command.args, dir_ + "/" + id + ".log");
    ASSERT_TRUE(p.ok()) << p.status();
    clients_.push_back(*std::move(p));
  }
  // The operator's full status (CoordinatorAdmin.Status) of the command
  // line's task, or of `task`.
  absl::StatusOr<proto::CoordinatorStatusResponse> Status(const std::string& task = "") {
    return StatusOf(true, task);
  }
  // What anyone may read (Coordinator.Status: no live counts, no worker address).
  absl::StatusOr<proto::CoordinatorStatusResponse> PublicStatus() { return StatusOf(false); }
  absl::StatusOr<proto::CoordinatorStatusResponse> StatusOf(bool admin,
                                                            const std::string& task = "") {
    if ((admin ? admin_stub_ == nullptr : stub_ == nullptr)) {
      return absl::FailedPreconditionError("no coordinator started (StartCoordinatorWith)");
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    proto::CoordinatorStatusResponse s;
    proto::CoordinatorStatusRequest req;
    req.set_task_id(task);
    grpc::Status st = admin ? admin_stub_->Status(&ctx, req, &s) : stub_->Status(&ctx, req, &s);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    return s;
  }
  // Polls until `pred` holds or `timeout` passes; returns the last status
  // (of `task`, default the command line's).
  template <typename Pred>
  proto::CoordinatorStatusResponse WaitFor(Pred pred, absl::Duration timeout,
                                           const std::string& task = "") {
    const absl::Time end = absl::Now() + timeout;
    proto::CoordinatorStatusResponse last;
    while (absl::Now() < end) {
      absl::StatusOr<proto::CoordinatorStatusResponse> s = Status(task);
      if (s.ok()) {
        last = *s;
        if (pred(last)) break;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return last;
  }

  std::string dir_;
  // Added to the environment of the coordinator / of each client started
  // after it is set (e.g. SkewedClockEnv).
  std::vector<std::string> coordinator_env_;
  std::vector<std::string> client_env_;
  AggregatorPair pair_;
  int port_ = 0;
  int admin_port_ = 0;
  std::unique_ptr<DaemonProcess> coordinator_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
  std::shared_ptr<grpc::Channel> admin_channel_;  // the operator's (mutual TLS)
  std::unique_ptr<proto::CoordinatorAdmin::Stub> admin_stub_;
  std::vector<std::unique_ptr<ChildProcess>> clients_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_FEDERATION_FIXTURE_H_
