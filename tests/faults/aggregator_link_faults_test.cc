// Faults on the link between the two aggregators, with the real daemons
// (fault harness, tests/faults): the leader dials the helper through a
// FaultProxy, and the link is cut, stalled, or slowed and made lossy while
// clients upload. Invariants checked in every scenario: every acknowledged
// upload is counted exactly once (both servers count the same reports), the
// released sum equals the plain sum of the counted reports, nothing is
// verified across a broken link, and the round completes once it heals.
// Each scenario prints what was injected and how long recovery took
// (bench/faults.md). Fixed seeds; each run is bounded in time.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "aggregator/testing/report_factory.h"
#include "base/grpc_status.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/faults/fault_proxy.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::AddInto;
using aggregator::testing::MakeReport;
using aggregator::testing::MakeRoundParameters;
using aggregator::testing::SumShares;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::FaultProxy;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;

using Endpoint = tandem::testing::AggregatorEndpoint;

class AggregatorLinkFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-link-faults");
    ASSERT_FALSE(dir_.empty());
    params_ = MakeRoundParameters("fault-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                  /*num_groups=*/4);
    auto h = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, Args("helper"), dir_ + "/helper.log");
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    auto proxy = FaultProxy::Start(Loopback(helper_->port()), /*seed=*/37);
    ASSERT_THAT(proxy, IsOk());
    proxy_ = *std::move(proxy);
    std::vector<std::string> leader_args = Args("leader");
    leader_args.push_back("--peer=" + proxy_->address());
    leader_args.insert(leader_args.end(), extra_leader_args_.begin(), extra_leader_args_.end());
    auto l = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, leader_args, dir_ + "/leader.log");
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
    leader_ep_ = Endpoint::Connect(Loopback(leader_->port()), grpc::InsecureChannelCredentials());
    helper_ep_ = Endpoint::Connect(Loopback(helper_->port()), grpc::InsecureChannelCredentials());
    TANDEM_ASSERT_OK(leader_ep_.Open(params_));
    TANDEM_ASSERT_OK(helper_ep_.Open(params_));
  }
  void TearDown() override {
    leader_.reset();
    proxy_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Flags added to the leader's (set by a subclass before SetUp).
  std::vector<std::string> extra_leader_args_;

  // The bare aggregation protocol on plaintext loopback (tickets, roles and
  // TLS do not change how the link behaves under these faults).
  std::vector<std::string> Args(const std::string& role) {
    return tandem::testing::BareAggregatorArgs(role, dir_);
  }

  // Uploads `n` more reports to both servers; each must be acknowledged.
  void Upload(int n) {
    for (int i = 0; i < n; ++i) {
      auto r = MakeReport(params_, ++seed_);
      ASSERT_THAT(r, IsOk());
      TANDEM_ASSERT_OK(leader_ep_.Upload(r->to_leader));
      TANDEM_ASSERT_OK(helper_ep_.Upload(r->to_helper));
      AddInto(expected_, r->dense);
    }
  }

  // The leader's Status, DEADLINE_EXCEEDED past `limit`: an operator's
  // status call must answer while a peer hangs.
  absl::StatusOr<proto::AggregatorStatusResponse> LeaderStatus(
      absl::Duration limit = absl::Seconds(10)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + limit));
    proto::AggregatorStatusRequest req;
    req.set_task_id(params_.task_id());
    proto::AggregatorStatusResponse resp;
    if (grpc::Status s = leader_ep_.collector->Status(&ctx, req, &resp); !s.ok()) {
      return FromGrpcStatus(s);
    }
    return resp;
  }

  uint64_t Accepted() {
    auto s = LeaderStatus();
    return s.ok() ? s->accepted_reports() : 0;
  }

  // How long until the leader has verified `n` reports with the helper
  // (fails the test after `limit`).
  absl::Duration WaitAccepted(uint64_t n, absl::Duration limit) {
    const absl::Time start = absl::Now();
    while (Accepted() < n && absl::Now() - start < limit) absl::SleepFor(absl::Milliseconds(50));
    EXPECT_EQ(Accepted(), n) << "not verified within " << limit;
    return absl::Now() - start;
  }

  // Waits (up to 30 s) for an armed CutAtResponse to cut the link.
  void WaitCut() {
    const absl::Time end = absl::Now() + absl::Seconds(30);
    while (!proxy_->is_cut() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_TRUE(proxy_->is_cut()) << "no call response crossed the link";
  }

  void ExpectReleasedSum() {
    auto a = leader_ep_.Finalize(params_.task_id(), params_.round_id());
    ASSERT_THAT(a, IsOk());
    auto b = helper_ep_.Finalize(params_.task_id(), params_.round_id());
    ASSERT_THAT(b, IsOk());
    const uint64_t uploaded = static_cast<uint64_t>(seed_);
    EXPECT_EQ(a->accepted_reports(), uploaded);  // every acknowledged upload, once
    EXPECT_EQ(b->accepted_reports(), uploaded);
    auto sum = SumShares(*a, *b);
    ASSERT_THAT(sum, IsOk());
    EXPECT_EQ(*sum, expected_);
  }

  std::string dir_;
  proto::RoundParameters params_;
  std::unique_ptr<DaemonProcess> leader_, helper_;
  std::unique_ptr<FaultProxy> proxy_;
  Endpoint leader_ep_, helper_ep_;
  std::vector<uint64_t> expected_;
  int seed_ = 0;
};

TEST_F(AggregatorLinkFaultsTest, PartitionDuringVerificationLosesNothing) {
  Upload(4);
  WaitAccepted(4, absl::Seconds(30));
  proxy_->Cut();
  Upload(4);  // each server still acknowledges (durably) its own share
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Accepted(), 4u) << "verified across a cut link";
  auto pending = leader_ep_.Status(params_.task_id());
  ASSERT_THAT(pending, IsOk());
  EXPECT_EQ(pending->pending_reports(), 4u);
  proxy_->Heal();
  const absl::Duration recovery = WaitAccepted(8, absl::Seconds(60));
  std::printf(
      "[fault] leader-helper cut 1 s during verification: recovered %.2f s after "
      "healing, %llu connections refused while cut\n",
      absl::ToDoubleSeconds(recovery),
      static_cast<unsigned long long>(proxy_->connections_refused()));
  ExpectReleasedSum();
  // The leader said why its verification stalled, and when it resumed.
  std::ifstream in(dir_ + "/leader.log");
  const std::string log(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(log.find("verification stalled: UNAVAILABLE"), std::string::npos) << log;
  EXPECT_NE(log.find("verification resumed after"), std::string::npos) << log;
}

// One verification pass for all of a test's uploads, for the tests that
// cut the link at the n-th response (FaultProxy::CutAtResponse) and so
// count on one exchange and one commit for the four uploads: the leader's
// tick is 1 s, not the default 25 ms, which could start a pass between two
// uploads and split them over passes (CI once saw the first pass's commit
// reach the helper before the cut of the second: 3 reports accepted there).
class AggregatorLinkFaultsOnePassTest : public AggregatorLinkFaultsTest {
 protected:
  void SetUp() override {
    extra_leader_args_ = {"--verify_interval=1s"};
    AggregatorLinkFaultsTest::SetUp();
  }
};

// The link is cut right after the helper's reply to the leader's Verify
// (FaultProxy::CutAtResponse): the leader has the verdicts, its
// CommitAcceptedSet meets the cut, so neither server counts the reports
// until the link heals and the pass is retried.
TEST_F(AggregatorLinkFaultsOnePassTest, PartitionBetweenVerifyAndCommitLosesNothing) {
  proxy_->CutAtResponse(1, /*before=*/false);
  Upload(4);
  WaitCut();
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Accepted(), 0u) << "committed across a cut link";
  auto helper = helper_ep_.Status(params_.task_id());
  ASSERT_THAT(helper, IsOk());
  EXPECT_EQ(helper->accepted_reports(), 0u) << "the commit reached the helper";
  proxy_->Heal();
  const absl::Duration recovery = WaitAccepted(4, absl::Seconds(60));
  std::printf(
      "[fault] leader-helper cut after Verify's reply, before CommitAcceptedSet: "
      "recovered %.2f s after healing\n",
      absl::ToDoubleSeconds(recovery));
  ExpectReleasedSum();
}

// The helper commits but its acknowledgement is lost (the link is cut just
// before it): the helper counts the reports, the leader does not yet; the
// leader's retried commit after healing is idempotent, so each report is
// counted once by both.
TEST_F(AggregatorLinkFaultsOnePassTest, ALostCommitAcknowledgementCountsEveryReportOnce) {
  proxy_->CutAtResponse(2, /*before=*/true);
  Upload(4);
  WaitCut();
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Accepted(), 0u);
  auto helper = helper_ep_.Status(params_.task_id());
  ASSERT_THAT(helper, IsOk());
  EXPECT_GE(helper->accepted_reports(), 1u) << "the commit did not reach the helper";
  proxy_->Heal();
  const absl::Duration recovery = WaitAccepted(4, absl::Seconds(60));
  std::printf(
      "[fault] leader-helper commit acknowledgement lost (%llu reports committed at the "
      "helper only): recovered %.2f s after healing\n",
      static_cast<unsigned long long>(helper->accepted_reports()), absl::ToDoubleSeconds(recovery));
  ExpectReleasedSum();
}

TEST_F(AggregatorLinkFaultsTest, AStalledLinkDelaysVerificationAndLosesNothing) {
  Upload(4);
  WaitAccepted(4, absl::Seconds(30));
  proxy_->Stall();  // a helper that hangs: its socket stays open, nothing comes back
  Upload(4);
  absl::SleepFor(absl::Seconds(1));
  // The leader's pass waits on the helper (up to its 60 s peer deadline);
  // its Status answers anyway (before the fix it blocked behind the pass).
  auto during = LeaderStatus(absl::Seconds(10));
  ASSERT_THAT(during, IsOk()) << "Status blocked behind a pass waiting on a hung peer";
  EXPECT_EQ(during->accepted_reports(), 4u) << "verified across a stalled link";
  EXPECT_EQ(during->pending_reports(), 4u);
  proxy_->Resume();
  const absl::Duration recovery = WaitAccepted(8, absl::Seconds(90));
  std::printf(
      "[fault] leader-helper stalled 1 s during verification: recovered %.2f s after "
      "resuming\n",
      absl::ToDoubleSeconds(recovery));
  ExpectReleasedSum();
}

TEST_F(AggregatorLinkFaultsTest, ASigstoppedHelperIsWaitedOutAndLosesNothing) {
  Upload(4);
  WaitAccepted(4, absl::Seconds(30));
  ASSERT_EQ(kill(helper_->pid(), SIGSTOP), 0);
  // Clients reach the leader; their helper uploads wait until it runs again.
  std::vector<proto::UploadRequest> to_helper;
  for (int i = 0; i < 4; ++i) {
    auto r = MakeReport(params_, ++seed_);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(leader_ep_.Upload(r->to_leader));
    to_helper.push_back(r->to_helper);
    AddInto(expected_, r->dense);
  }
  absl::SleepFor(absl::Seconds(1));
  auto during = LeaderStatus(absl::Seconds(10));
  ASSERT_THAT(during, IsOk()) << "the leader's Status hung with its helper stopped";
  EXPECT_EQ(during->accepted_reports(), 4u);
  ASSERT_EQ(kill(helper_->pid(), SIGCONT), 0);
  for (const proto::UploadRequest& r : to_helper) TANDEM_ASSERT_OK(helper_ep_.Upload(r));
  const absl::Duration recovery = WaitAccepted(8, absl::Seconds(90));
  std::printf("[fault] helper SIGSTOPped 1 s: recovered %.2f s after SIGCONT\n",
              absl::ToDoubleSeconds(recovery));
  ExpectReleasedSum();
}

TEST_F(AggregatorLinkFaultsTest, ASlowLossyLinkStillReleasesTheExactSum) {
  // 300 ms +- 50 ms each way, 3 % of chunks held a 200 ms RTO more.
  proxy_->SetDelay(absl::Milliseconds(300), absl::Milliseconds(50));
  proxy_->SetLoss(0.03, absl::Milliseconds(200));
  Upload(12);
  const absl::Duration took = WaitAccepted(12, absl::Seconds(60));
  std::printf("[fault] leader-helper link 300 ms + 3 %% loss: 12 reports verified in %.2f s\n",
              absl::ToDoubleSeconds(took));
  ExpectReleasedSum();
}

TEST_F(AggregatorLinkFaultsTest, AFinalizeDuringAPartitionIsRetriedAfterHealing) {
  Upload(6);
  WaitAccepted(6, absl::Seconds(30));
  const std::vector<uint64_t> first_six = expected_;
  Upload(2);  // pending when the link breaks
  proxy_->Cut();
  // The leader cannot settle its pending reports with the helper: either it
  // refuses to release now, or it releases only what both servers counted;
  // whatever it answers, the helper's count must match the leader's.
  auto early = leader_ep_.Finalize(params_.task_id(), params_.round_id());
  std::printf("[fault] leader Finalize during a leader-helper cut: %s\n",
              early.ok() ? "released" : early.status().ToString().c_str());
  proxy_->Heal();
  if (early.ok()) {
    auto b = helper_ep_.Finalize(params_.task_id(), params_.round_id());
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(early->accepted_reports(), b->accepted_reports());
    auto sum = SumShares(*early, *b);
    ASSERT_THAT(sum, IsOk());
    // Exactly the verified reports (the six) or all eight, never a mix.
    if (early->accepted_reports() == 6) {
      EXPECT_EQ(*sum, first_six);
    } else {
      EXPECT_EQ(early->accepted_reports(), 8u);
      EXPECT_EQ(*sum, expected_);
    }
  } else {
    WaitAccepted(8, absl::Seconds(60));
    ExpectReleasedSum();
  }
}

}  // namespace
}  // namespace tandem
