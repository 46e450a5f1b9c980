// The helper keeps its own verdicts (issue 34 item 5) against a malicious
// leader, with a real tandem-aggregator helper: the real leader is
// SIGKILLed and the test plays the leader with the aggregator core, the
// leader's certificate and its peer channel. It is honest in everything
// (its DPF expansions, FLP verifier shares and digests are the leader's
// own) but its commits, which move a victim's report, that the helper
// verified valid, into rejected_ids: the commit a leader would send to get a
// round of its own reports around one victim's released. The helper must
// refuse it whole, change nothing, and count the report once the leader
// commits honestly.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "aggregator/core/aggregator.h"
#include "aggregator/core/peer_channel.h"
#include "aggregator/core/policy.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/service/daemon.h"
#include "aggregator/service/grpc_peer_channel.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/ed25519.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/integration/aggregator_pair_fixture.h"

namespace tandem::integration {
namespace {

using ::testing::HasSubstr;

// The leader's peer channel, with its commits rewritten while `tamper` is
// set: `victim` moves from report_ids to rejected_ids. Records what the
// helper answered.
class TamperingPeer : public aggregator::PeerChannel {
 public:
  explicit TamperingPeer(std::unique_ptr<aggregator::PeerChannel> real) : real_(std::move(real)) {}
  absl::StatusOr<proto::VerifyResponse> Verify(const proto::VerifyRequest& request) override {
    return real_->Verify(request);
  }
  absl::StatusOr<proto::AcceptedSetAck> CommitAcceptedSet(
      const proto::AcceptedSet& request) override {
    proto::AcceptedSet sent = request;
    if (tamper) {
      auto* ids = sent.mutable_report_ids();
      auto it = std::find(ids->begin(), ids->end(), victim);
      if (it != ids->end()) {
        ids->erase(it);
        sent.add_rejected_ids(victim);
        ++tampered;
      }
    }
    absl::StatusOr<proto::AcceptedSetAck> ack = real_->CommitAcceptedSet(sent);
    last = ack.status();
    return ack;
  }

  bool tamper = true;
  std::string victim;
  int tampered = 0;
  absl::Status last;

 private:
  std::unique_ptr<aggregator::PeerChannel> real_;
};

class MaliciousLeaderTest : public AggregatorPairTest {
 protected:
  // The leader's core with the real leader's policy (kPolicy, the
  // provisioned tasks) and ticket key, its store under dir_, talking to the
  // real helper's peer listener as leader.tandem.
  void StartCoreLeader() {
    proto::AggregatorConfig config;
    config.set_role("leader");
    ASSERT_TRUE(
        google::protobuf::TextFormat::MergeFromString(kPolicy, config.mutable_default_policy()));
    for (const char* t : kProvisionedTasks) {
      *config.add_task_policies() = aggregator::TaskPolicyFromFlag(t);
    }
    auto policies = aggregator::PolicySet::FromConfig(config);
    ASSERT_THAT(policies, IsOk());
    aggregator::AggregatorOptions options;
    options.role = aggregator::Role::kLeader;
    options.policies = *std::move(policies);
    auto key = crypto::Ed25519VerifyingKey::FromPem(Read(dir_ + "/ticket.pub"));
    ASSERT_THAT(key, IsOk());
    options.ticket_key = std::make_shared<const crypto::Ed25519VerifyingKey>(*std::move(key));
    options.require_device_bound_tickets = true;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("helper.tandem");
    args.SetMaxReceiveMessageSize(32 << 20);
    args.SetMaxSendMessageSize(32 << 20);
    auto channel = grpc::CreateCustomChannel(pair_.helper_peer_address(), As("leader").creds, args);
    peer_ = std::make_unique<TamperingPeer>(
        std::make_unique<aggregator::GrpcPeerChannel>(channel, absl::Seconds(30)));
    std::filesystem::create_directories(dir_ + "/core-leader");
    auto core = aggregator::Aggregator::Create(
        std::move(options), aggregator::MakeSqliteStoreFactory(dir_ + "/core-leader"), peer_.get(),
        RealClock::Default(), OpenSslRandom::Default());
    ASSERT_THAT(core, IsOk());
    leader_ = *std::move(core);
  }

  std::unique_ptr<TamperingPeer> peer_;
  std::unique_ptr<aggregator::Aggregator> leader_;
};

TEST_F(MaliciousLeaderTest, HelperRefusesACommitRejectingAReportItVerifiedValid) {
  pair_.leader->Kill();  // the test plays the leader from here on
  ASSERT_NO_FATAL_FAILURE(StartCoreLeader());
  proto::OpenRoundRequest open;
  *open.mutable_parameters() = params_;
  proto::OpenRoundResponse opened;
  ASSERT_TRUE(Collector(As("coordinator"), /*helper=*/true)
                  ->OpenRound(Deadline().get(), open, &opened)
                  .ok());
  TANDEM_ASSERT_OK(leader_->OpenRound(params_));
  constexpr int kReports = 4;  // above the minimum batch (3)
  for (int i = 1; i <= kReports; ++i) {
    TestReport r = Honest(i);
    if (i == 1) peer_->victim = r.to_helper.report_id();
    TANDEM_ASSERT_OK(leader_->Upload(r.to_leader).status());
    TANDEM_ASSERT_OK(Upload(r.to_helper, /*helper=*/true));
  }

  // Verified at both (the helper's digests equal the leader's), then the
  // tampered commit: refused whole.
  EXPECT_FALSE(leader_->ProcessPending(params_.task_id()).ok());
  ASSERT_GE(peer_->tampered, 1);
  EXPECT_EQ(peer_->last.code(), absl::StatusCode::kFailedPrecondition) << peer_->last;
  EXPECT_THAT(peer_->last.message(), HasSubstr("verified as valid"));
  absl::StatusOr<proto::AggregatorStatusResponse> helper = Status(/*helper=*/true);
  ASSERT_THAT(helper, IsOk());
  EXPECT_EQ(helper->accepted_reports(), 0u);
  EXPECT_EQ(helper->rejected_reports(), 0u);
  EXPECT_EQ(helper->pending_reports(), static_cast<uint64_t>(kReports));

  // The same leader committing honestly: every report counted, the victim's
  // included, and the helper's sum releases with all of them.
  peer_->tamper = false;
  for (int i = 0; i < 20 && Status(true)->accepted_reports() < kReports; ++i) {
    (void)leader_->ProcessPending(params_.task_id());
    absl::SleepFor(absl::Milliseconds(100));
  }
  helper = Status(/*helper=*/true);
  ASSERT_THAT(helper, IsOk());
  EXPECT_EQ(helper->accepted_reports(), static_cast<uint64_t>(kReports));
  EXPECT_EQ(helper->rejected_reports(), 0u);
  EXPECT_EQ(peer_->last.code(), absl::StatusCode::kOk) << peer_->last;
}

}  // namespace
}  // namespace tandem::integration
