// The fixture of the aggregators' adversarial tests: a real leader/helper
// pair with TLS, roles checked by certificate identity, upload tickets, the
// servers' own privacy policy and provisioned tasks, and gRPC callers that
// present a chosen identity (or none). Test-only; one test binary each.
#ifndef TANDEM_TESTS_INTEGRATION_AGGREGATOR_PAIR_FIXTURE_H_
#define TANDEM_TESTS_INTEGRATION_AGGREGATOR_PAIR_FIXTURE_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "aggregator/testing/report_factory.h"
#include "base/grpc_status.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem::integration {

using aggregator::testing::AttachTicket;
using aggregator::testing::MakeNormRoundParameters;
using aggregator::testing::MakeReportWithValues;
using aggregator::testing::TestDeviceKey;
using aggregator::testing::TestReport;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

constexpr char kPolicy[] = "min_batch_size: 3 epsilon_budget: 6";
// What the pair's operator provisioned (--task): the tasks of the tests,
// two of them sharing the population "phones".
constexpr const char* kProvisionedTasks[] = {"adv-task@phones", "adv-eval@phones", "adv-solo"};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A gRPC caller: which TLS identity it presents (none for an anonymous
// client) and which server name it expects.
struct Caller {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  std::shared_ptr<grpc::Channel> To(const std::string& address, const std::string& server) const {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(server);
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    return grpc::CreateCustomChannel(address, creds, args);
  }
};

std::unique_ptr<grpc::ClientContext> Deadline() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

class AggregatorPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-adversarial");
    ASSERT_FALSE(dir_.empty());
    TANDEM_ASSERT_OK(tandem::testing::MakeRoleCertificates(dir_));
    TANDEM_ASSERT_OK(StartPair());
    auto key = crypto::Ed25519SigningKey::FromPem(Read(dir_ + "/ticket.key"));
    ASSERT_THAT(key, IsOk());
    ticket_key_ = std::make_unique<crypto::Ed25519SigningKey>(*std::move(key));
    auto other = crypto::Ed25519SigningKey::FromPem(Read(dir_ + "/other_ticket.key"));
    ASSERT_THAT(other, IsOk());
    other_key_ = std::make_unique<crypto::Ed25519SigningKey>(*std::move(other));
    // z = sqrt(noise_variance) / sqrt(max_l2_squared) = 1 exactly.
    params_ = MakeNormRoundParameters("adv-task", 1, /*log_num_blocks=*/3, /*block_size=*/8,
                                      /*num_groups=*/2, /*block=*/400, /*total=*/1200);
    params_.set_noise_variance(1200);
    params_.mutable_dp()->set_min_batch_size(3);
    params_.set_max_reports(50);
  }
  void TearDown() override {
    pair_.leader.reset();
    pair_.helper.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // Both daemons, as an operator runs them: TLS, tickets, kPolicy, and the
  // provisioned tasks kProvisionedTasks (of the state under dir_, so a
  // second call after StopPair is a restart).
  absl::Status StartPair() {
    tandem::testing::AggregatorPairOptions o;
    o.certs_dir = dir_;
    o.ticket_public_key = ticket_keys_.empty() ? dir_ + "/ticket.pub" : ticket_keys_;
    o.policy = kPolicy;  // otherwise the private defaults
    o.tasks = {kProvisionedTasks, kProvisionedTasks + std::size(kProvisionedTasks)};
    o.operator_api = operator_api_;
    auto pair = tandem::testing::StartAggregatorPair(TANDEM_AGGREGATOR_BIN, dir_ + "/state", o);
    if (!pair.ok()) return pair.status();
    pair_ = *std::move(pair);
    return absl::OkStatus();
  }
  // SIGKILL of both daemons.
  void KillPair() {
    pair_.leader->Kill();
    pair_.helper->Kill();
    pair_.leader.reset();
    pair_.helper.reset();
  }

  Caller Anonymous() const {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(dir_ + "/ca.pem");
    return {grpc::SslCredentials(o)};
  }
  // `name`.pem/.key from MakeRoleCertificates, verifying servers with ca.pem.
  Caller As(const std::string& name) const {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(dir_ + "/ca.pem");
    o.pem_cert_chain = Read(dir_ + "/" + name + ".pem");
    o.pem_private_key = Read(dir_ + "/" + name + ".key");
    return {grpc::SslCredentials(o)};
  }

  std::unique_ptr<proto::AggregatorCollector::Stub> Collector(const Caller& c, bool helper) {
    return proto::AggregatorCollector::NewStub(
        helper ? c.To(pair_.helper_collector_address(), "helper.tandem")
               : c.To(pair_.leader_collector_address(), "leader.tandem"));
  }
  std::unique_ptr<proto::AggregatorUpload::Stub> Uploader(bool helper) {
    return proto::AggregatorUpload::NewStub(
        helper ? Anonymous().To(pair_.helper_address(), "helper.tandem")
               : Anonymous().To(pair_.leader_address(), "leader.tandem"));
  }

  absl::Status Open(const proto::RoundParameters& p, bool helper) {
    proto::OpenRoundRequest req;
    *req.mutable_parameters() = p;
    proto::OpenRoundResponse resp;
    auto ctx = Deadline();
    return FromGrpcStatus(Collector(As("coordinator"), helper)->OpenRound(ctx.get(), req, &resp));
  }
  absl::Status OpenBoth(const proto::RoundParameters& p) {
    absl::Status a = Open(p, false);
    absl::Status b = Open(p, true);
    return a.ok() ? b : a;
  }
  absl::StatusOr<proto::FinalizeResponse> Finalize(bool helper, uint64_t round = 1,
                                                   const std::string& task = "") {
    proto::FinalizeRequest req;
    req.set_task_id(task.empty() ? params_.task_id() : task);
    req.set_round_id(round);
    proto::FinalizeResponse resp;
    auto ctx = Deadline();
    grpc::Status s = Collector(As("coordinator"), helper)->Finalize(ctx.get(), req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    return resp;
  }
  absl::StatusOr<proto::AggregatorStatusResponse> Status(bool helper,
                                                         const std::string& task = "") {
    proto::AggregatorStatusRequest req;
    req.set_task_id(task.empty() ? params_.task_id() : task);
    proto::AggregatorStatusResponse resp;
    auto ctx = Deadline();
    grpc::Status s = Collector(As("coordinator"), helper)->Status(ctx.get(), req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    return resp;
  }
  absl::Status Upload(const proto::UploadRequest& req, bool helper) {
    proto::UploadResponse resp;
    auto ctx = Deadline();
    return FromGrpcStatus(Uploader(helper)->Upload(ctx.get(), req, &resp));
  }

  proto::SignedUploadTicket Ticket(const std::string& id, uint64_t round, int64_t expiry_ms,
                                   const crypto::Ed25519SigningKey& key) {
    proto::UploadTicket t;
    t.set_task_id(params_.task_id());
    t.set_round_id(round);
    t.set_ticket_id(id);
    t.set_expiry_unix_ms(expiry_ms);
    return crypto::SignUploadTicket(key, t).value();
  }
  int64_t InAMinute() const { return absl::ToUnixMillis(absl::Now() + absl::Minutes(1)); }

  // An honest client's report (|x| <= 4 per value) with its ticket, for
  // the round `params` (default params_).
  TestReport Honest(uint64_t seed, const proto::RoundParameters* params = nullptr) {
    const proto::RoundParameters& p = params == nullptr ? params_ : *params;
    std::vector<int64_t> v(2 * 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((seed * 7 + i) % 9) - 4;
    TestReport r = MakeReportWithValues(p, v, seed).value();
    // Bound to the report's test device, which signs both uploads, as a
    // real coordinator and client do (crypto/sign/device_auth.h).
    EXPECT_THAT(AttachTicket(r, p, *ticket_key_, InAMinute()), IsOk());
    return r;
  }

  // Waits until both servers counted `n` reports (the leader's verification
  // loop runs every 100 ms).
  void WaitAccepted(uint64_t n) {
    for (int i = 0; i < 100; ++i) {
      auto a = Status(false);
      auto b = Status(true);
      if (a.ok() && b.ok() && a->accepted_reports() == n && b->accepted_reports() == n) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "reports were not accepted: " << Counts();
  }

  // pending/accepted/rejected/released rounds/epsilon of both servers.
  std::string Counts() {
    std::string out;
    for (bool helper : {false, true}) {
      auto s = Status(helper);
      if (!s.ok()) return s.status().ToString();
      out +=
          absl::StrCat(s->pending_reports(), "/", s->accepted_reports(), "/", s->rejected_reports(),
                       "/", s->released_rounds(), "/", s->epsilon_spent(), ";");
    }
    return out;
  }

  std::string dir_;
  tandem::testing::AggregatorPair pair_;
  std::unique_ptr<crypto::Ed25519SigningKey> ticket_key_, other_key_;
  // The daemons' --coordinator_key (empty: ticket.pub alone).
  std::string ticket_keys_;
  proto::RoundParameters params_;
  // Set before SetUp (a derived fixture's constructor): the operator APIs.
  bool operator_api_ = false;
};

}  // namespace tandem::integration

#endif  // TANDEM_TESTS_INTEGRATION_AGGREGATOR_PAIR_FIXTURE_H_
