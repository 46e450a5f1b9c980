// Two Aggregators wired in-process (real DPF keys, real stores): the decoded
// sum equals the plain sum, bad reports never reach it, restarts lose nothing.
#include "aggregator/core/aggregator.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/store/in_memory_report_store.h"
#include "aggregator/testing/in_memory_store_factory.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::AddInto;
using ::tandem::aggregator::testing::InMemoryFactory;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::aggregator::testing::SumShares;
using ::tandem::aggregator::testing::TestReport;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

class AggregatorPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-agg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/leader");
    std::filesystem::create_directories(dir_ + "/helper");
    Start(/*sqlite=*/false);
    params_ = MakeRoundParameters("task", 1, /*log_num_blocks=*/3, /*block_size=*/8,
                                  /*num_groups=*/4);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Start(bool sqlite) {
    leader_.reset();
    helper_.reset();
    AggregatorOptions lo;
    lo.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
    lo.role = Role::kLeader;
    lo.verify_batch_size = 3;  // several batches per round
    AggregatorOptions ho;
    ho.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
    ho.role = Role::kHelper;
    auto h = Aggregator::Create(ho, sqlite ? MakeSqliteStoreFactory(dir_ + "/helper") : InMemoryFactory(),
                                nullptr, &clock_, noise_.get());
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    channel_.set_helper(helper_.get());
    auto l = Aggregator::Create(lo, sqlite ? MakeSqliteStoreFactory(dir_ + "/leader") : InMemoryFactory(),
                                &channel_, &clock_, noise_.get());
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
  }

  void OpenBoth() {
    TANDEM_ASSERT_OK(leader_->OpenRound(params_));
    TANDEM_ASSERT_OK(helper_->OpenRound(params_));
  }

  TestReport Report(uint64_t seed) {
    auto r = MakeReport(params_, seed);
    EXPECT_THAT(r, IsOk());
    return *std::move(r);
  }

  void UploadBoth(const TestReport& r) {
    TANDEM_EXPECT_OK(leader_->Upload(r.to_leader));
    TANDEM_EXPECT_OK(helper_->Upload(r.to_helper));
  }

  // Finalizes leader then helper and returns the decoded sum.
  absl::StatusOr<std::vector<uint64_t>> FinalizeSum(uint64_t* count = nullptr) {
    proto::FinalizeRequest req;
    req.set_task_id(params_.task_id());
    req.set_round_id(params_.round_id());
    auto a = leader_->Finalize(req);
    if (!a.ok()) return a.status();
    auto b = helper_->Finalize(req);
    if (!b.ok()) return b.status();
    if (a->accepted_reports() != b->accepted_reports()) {
      return absl::InternalError("servers disagree on the accepted count");
    }
    if (count != nullptr) *count = a->accepted_reports();
    return SumShares(*a, *b);
  }

  proto::AggregatorStatusResponse StatusOf(Aggregator& a) {
    proto::AggregatorStatusRequest req;
    req.set_task_id(params_.task_id());
    absl::StatusOr<proto::AggregatorStatusResponse> s = a.Status(req);
    EXPECT_THAT(s, IsOk());
    return s.ok() ? *s : proto::AggregatorStatusResponse();
  }
  // A Verify the leader never sent: the helper evaluates `r` at a wrong hash.
  void VerifyAtWrongHash(const TestReport& r) {
    proto::VerifyRequest verify;
    verify.set_task_id(params_.task_id());
    verify.set_round_id(params_.round_id());
    proto::ReportCheck* check = verify.add_checks();
    check->set_report_id(r.to_helper.report_id());
    check->set_proof_hash(std::string(32, 'x'));
    TANDEM_ASSERT_OK(helper_->HandleVerify(verify).status());
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> noise_ = DeterministicRandom::FromSeed(99);
  InProcessPeerChannel channel_;
  std::unique_ptr<Aggregator> leader_, helper_;
  proto::RoundParameters params_;
};

TEST_F(AggregatorPairTest, DecodedSumEqualsPlainSum) {
  OpenBoth();
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    TestReport r = Report(seed);
    UploadBoth(r);
    AddInto(expected, r.dense);
  }
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 10u);
  EXPECT_EQ(*sum, expected);
  // One expansion per accepted report on each server: the digest's.
  for (Aggregator* a : {leader_.get(), helper_.get()}) {
    const proto::AggregatorStatusResponse st = StatusOf(*a);
    EXPECT_EQ(st.share_expansions(), 10u) << st.role();
    EXPECT_EQ(st.undo_expansions(), 0u) << st.role();
    EXPECT_EQ(st.check_evaluations(), 0u) << st.role();
  }
}

TEST_F(AggregatorPairTest, HelperCountsFromItsTentativeSumAndTakesTheRestOut) {
  OpenBoth();
  TestReport a = Report(1), b = Report(2), stray = Report(3);
  UploadBoth(a);
  UploadBoth(b);
  // The helper evaluates `a` and a report the leader never gets (both into
  // its tentative sum, both marked invalid).
  TANDEM_ASSERT_OK(helper_->Upload(stray.to_helper));
  VerifyAtWrongHash(a);
  VerifyAtWrongHash(stray);
  // The leader's real exchange: `a` is asked again (checked, not added
  // twice), `b` is new; the commit counts both from the tentative sum and
  // takes `stray` back out.
  EXPECT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(2));
  const proto::AggregatorStatusResponse h = StatusOf(*helper_);
  EXPECT_EQ(h.share_expansions(), 3u);
  EXPECT_EQ(h.check_evaluations(), 1u);
  EXPECT_EQ(h.undo_expansions(), 1u);
  std::vector<uint64_t> expected;
  AddInto(expected, a.dense);
  AddInto(expected, b.dense);
  auto sum = FinalizeSum();
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);
}

TEST_F(AggregatorPairTest, LostVerifyAnswerIsAskedAgainAndCountedOnce) {
  OpenBoth();
  std::vector<uint64_t> expected;
  for (uint64_t s = 1; s <= 3; ++s) {
    TestReport r = Report(s);
    UploadBoth(r);
    AddInto(expected, r.dense);
  }
  channel_.set_drop_verify_replies(true);
  EXPECT_THAT(leader_->ProcessPending("task"), StatusIs(absl::StatusCode::kUnavailable));
  channel_.set_drop_verify_replies(false);
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(*sum, expected);
  const proto::AggregatorStatusResponse h = StatusOf(*helper_);
  EXPECT_EQ(h.share_expansions(), 3u);
  EXPECT_EQ(h.check_evaluations(), 3u);
  EXPECT_EQ(h.undo_expansions(), 0u);
}

TEST_F(AggregatorPairTest, MalformedShareIsRejectedAndDoesNotChangeTheSum) {
  OpenBoth();
  TestReport good = Report(1);
  UploadBoth(good);
  TestReport bad = Report(2);
  bad.to_leader.mutable_key_share()->mutable_keys(0)->set_seed("short");
  EXPECT_THAT(leader_->Upload(bad.to_leader), StatusIs(absl::StatusCode::kInvalidArgument));
  bad.to_leader.mutable_key_share()->mutable_keys()->RemoveLast();
  EXPECT_THAT(leader_->Upload(bad.to_leader), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::UploadRequest no_id = good.to_helper;
  no_id.set_report_id("x");
  EXPECT_THAT(helper_->Upload(no_id), StatusIs(absl::StatusCode::kInvalidArgument));
  auto sum = FinalizeSum();
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, good.dense);
}

TEST_F(AggregatorPairTest, MismatchedSharesAreRejectedByTheProof) {
  OpenBoth();
  TestReport a = Report(1), b = Report(2), c = Report(3);
  UploadBoth(a);
  // Client sends the leader a share of one vector and the helper a share of
  // another under the same report id: the VDPF digests differ.
  proto::UploadRequest mixed = c.to_helper;
  mixed.set_report_id(b.to_leader.report_id());
  TANDEM_ASSERT_OK(leader_->Upload(b.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(mixed));
  // A tampered public part (correction word flipped in the helper's copy).
  TestReport d = Report(4);
  std::string* cw = d.to_helper.mutable_key_share()->mutable_keys(1)->mutable_correction_words(0)
                        ->mutable_seed();
  (*cw)[3] ^= 0x40;
  UploadBoth(d);
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(*sum, a.dense);
  proto::AggregatorStatusRequest sreq;
  sreq.set_task_id("task");
  auto status = leader_->Status(sreq);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(status->rejected_reports(), 2u);
  // Every report was expanded once; the two rejected ones were taken back
  // out of the tentative sum on both servers.
  for (Aggregator* agg : {leader_.get(), helper_.get()}) {
    const proto::AggregatorStatusResponse st = StatusOf(*agg);
    EXPECT_EQ(st.share_expansions(), 3u) << st.role();
    EXPECT_EQ(st.undo_expansions(), 2u) << st.role();
  }
}

TEST_F(AggregatorPairTest, ReplaysAndRetries) {
  OpenBoth();
  TestReport a = Report(1);
  UploadBoth(a);
  TANDEM_EXPECT_OK(leader_->Upload(a.to_leader));  // identical retry is fine
  proto::UploadRequest other = Report(2).to_leader;
  other.set_report_id(a.to_leader.report_id());
  EXPECT_THAT(leader_->Upload(other), StatusIs(absl::StatusCode::kAlreadyExists));
  auto sum = FinalizeSum();
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, a.dense);
  // The same report in the next round is a replay.
  params_.set_round_id(2);
  OpenBoth();
  proto::UploadRequest replay = a.to_leader;
  replay.set_round_id(2);
  EXPECT_THAT(leader_->Upload(replay), StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST_F(AggregatorPairTest, UnknownClosedAndLateRoundsAreRefused) {
  TestReport a = Report(1);
  EXPECT_THAT(leader_->Upload(a.to_leader), StatusIs(absl::StatusCode::kNotFound));
  params_.set_deadline_unix_ms(absl::ToUnixMillis(clock_.Now()) + 1000);
  OpenBoth();
  UploadBoth(a);
  proto::UploadRequest future = Report(2).to_leader;
  future.set_round_id(5);
  EXPECT_THAT(leader_->Upload(future), StatusIs(absl::StatusCode::kNotFound));
  // Past the deadline by more than the clock skew tolerated (5 minutes).
  clock_.Advance(absl::Minutes(5) + absl::Seconds(2));
  EXPECT_THAT(leader_->Upload(Report(3).to_leader),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(FinalizeSum(), IsOk());
  clock_.SetTime(absl::FromUnixMillis(params_.deadline_unix_ms() - 500));
  EXPECT_THAT(leader_->Upload(Report(4).to_leader),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(AggregatorPairTest, ConcurrentUploadsAreGroupCommittedAndAllCounted) {
  Start(/*sqlite=*/true);
  OpenBoth();
  constexpr int kThreads = 8, kPerThread = 4;
  std::vector<TestReport> reports;
  std::vector<uint64_t> expected;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    reports.push_back(Report(100 + i));
    AddInto(expected, reports.back().dense);
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kPerThread; ++j) {
        const TestReport& r = reports[t * kPerThread + j];
        if (!leader_->Upload(r.to_leader).ok() || !helper_->Upload(r.to_helper).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(*sum, expected);
}

TEST_F(AggregatorPairTest, RoundCapIsEnforced) {
  params_.set_max_reports(2);
  OpenBoth();
  UploadBoth(Report(1));
  UploadBoth(Report(2));
  EXPECT_THAT(leader_->Upload(Report(3).to_leader),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST_F(AggregatorPairTest, HalfUploadedReportIsNeverCounted) {
  OpenBoth();
  TestReport a = Report(1), only_leader = Report(2), only_helper = Report(3);
  UploadBoth(a);
  TANDEM_ASSERT_OK(leader_->Upload(only_leader.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(only_helper.to_helper));
  auto decided = leader_->ProcessPending("task");
  ASSERT_THAT(decided, IsOk());
  EXPECT_EQ(*decided, 1);  // only the complete report; the half one waits
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(*sum, a.dense);
}

TEST_F(AggregatorPairTest, UnreachableHelperLosesNothing) {
  OpenBoth();
  TestReport a = Report(1), b = Report(2);
  UploadBoth(a);
  UploadBoth(b);
  channel_.set_unreachable(true);
  EXPECT_THAT(leader_->ProcessPending("task"), StatusIs(absl::StatusCode::kUnavailable));
  proto::FinalizeRequest req;
  req.set_task_id("task");
  req.set_round_id(1);
  EXPECT_THAT(leader_->Finalize(req), StatusIs(absl::StatusCode::kUnavailable));
  channel_.set_unreachable(false);
  // A commit whose acknowledgement is lost: the helper counted, the leader
  // did not; the next pass learns it from the helper and counts once.
  channel_.set_drop_commit_replies(true);
  EXPECT_THAT(leader_->ProcessPending("task"), StatusIs(absl::StatusCode::kUnavailable));
  channel_.set_drop_commit_replies(false);
  std::vector<uint64_t> expected;
  AddInto(expected, a.dense);
  AddInto(expected, b.dense);
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(*sum, expected);
}

TEST_F(AggregatorPairTest, HelperRefusesCommitItDidNotVerify) {
  OpenBoth();
  TestReport a = Report(1);
  UploadBoth(a);
  proto::AcceptedSet commit;
  commit.set_task_id("task");
  commit.set_round_id(1);
  commit.add_report_ids(a.to_helper.report_id());
  EXPECT_THAT(helper_->HandleCommit(commit), StatusIs(absl::StatusCode::kFailedPrecondition));
  proto::VerifyRequest verify;
  verify.set_task_id("task");
  verify.set_round_id(1);
  proto::ReportCheck* check = verify.add_checks();
  check->set_report_id(a.to_helper.report_id());
  check->set_proof_hash(std::string(32, 'x'));  // not the true digest
  TANDEM_ASSERT_OK(helper_->HandleVerify(verify).status());
  EXPECT_THAT(helper_->HandleCommit(commit), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Issue 34 item 5: a leader cannot reject a report the helper itself
// verified valid (nor, above, accept one it did not verify).
TEST_F(AggregatorPairTest, HelperRefusesALeaderRejectingAReportItVerifiedValid) {
  OpenBoth();
  TestReport a = Report(1);
  UploadBoth(a);
  const std::string id = a.to_helper.report_id();
  proto::VerifyRequest verify;
  verify.set_task_id("task");
  verify.set_round_id(1);
  proto::ReportCheck* check = verify.add_checks();
  check->set_report_id(id);
  check->set_proof_hash(std::string(32, 'x'));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::VerifyResponse answer, helper_->HandleVerify(verify));
  ASSERT_EQ(answer.checks_size(), 1);
  // Asked again at the helper's own digest (what an honest leader's equals
  // for a valid report): the helper now holds it verified valid.
  check->set_proof_hash(answer.checks(0).proof_hash());
  TANDEM_ASSERT_OK(helper_->HandleVerify(verify).status());
  proto::AcceptedSet commit;
  commit.set_task_id("task");
  commit.set_round_id(1);
  commit.add_rejected_ids(id);
  EXPECT_THAT(helper_->HandleCommit(commit),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("verified as valid")));
  EXPECT_EQ(StatusOf(*helper_).rejected_reports(), 0u);
  EXPECT_EQ(StatusOf(*helper_).pending_reports(), 1u);
  // The honest leader's pass counts it at both.
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(StatusOf(*helper_).accepted_reports(), 1u);
  EXPECT_EQ(StatusOf(*leader_).accepted_reports(), 1u);
}

// Issue 34 item 5: uploads sent to the leader alone are expanded with
// backoff (100 ms doubling to 10 s), not on every verification pass, and a
// share that reaches the helper later is still counted.
TEST_F(AggregatorPairTest, LeaderBacksOffReportsTheHelperDoesNotHold) {
  OpenBoth();
  TestReport a = Report(1);
  TANDEM_ASSERT_OK(leader_->Upload(a.to_leader));
  auto evaluations = [&] {
    const proto::AggregatorStatusResponse s = StatusOf(*leader_);
    return s.check_evaluations() + s.share_expansions();
  };
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(evaluations(), 1u);
  for (int i = 0; i < 20; ++i) TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(evaluations(), 1u);  // within the backoff: skipped
  clock_.Advance(absl::Milliseconds(100));
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(evaluations(), 2u);
  clock_.Advance(absl::Milliseconds(100));  // the backoff doubled: 200 ms
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(evaluations(), 2u);
  // The helper's share arrives; after the backoff the report is counted.
  TANDEM_ASSERT_OK(helper_->Upload(a.to_helper));
  clock_.Advance(absl::Milliseconds(100));
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(StatusOf(*leader_).accepted_reports(), 1u);
  EXPECT_EQ(StatusOf(*helper_).accepted_reports(), 1u);
}

TEST_F(AggregatorPairTest, MinimumBatchSizeBlocksRelease) {
  params_.mutable_dp()->set_min_batch_size(3);
  OpenBoth();
  UploadBoth(Report(1));
  UploadBoth(Report(2));
  EXPECT_THAT(FinalizeSum(), StatusIs(absl::StatusCode::kFailedPrecondition));
  UploadBoth(Report(3));
  EXPECT_THAT(FinalizeSum(), IsOk());
}

TEST_F(AggregatorPairTest, NoiseIsAddedOnceAndRetriesReturnTheSameShare) {
  params_.set_noise_variance(100.0);  // sigma = 10 per server
  OpenBoth();
  std::vector<uint64_t> expected;
  for (uint64_t s = 1; s <= 3; ++s) {
    TestReport r = Report(s);
    UploadBoth(r);
    AddInto(expected, r.dense);
  }
  auto first = FinalizeSum();
  ASSERT_THAT(first, IsOk());
  double sq = 0;
  int differing = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const int64_t e = static_cast<int64_t>((*first)[i] - expected[i]);
    sq += static_cast<double>(e) * e;
    differing += e != 0;
  }
  const double variance = sq / expected.size();  // expect 2 * 100
  EXPECT_GT(variance, 100.0);
  EXPECT_LT(variance, 400.0);
  EXPECT_GT(differing, static_cast<int>(expected.size()) / 2);
  auto again = FinalizeSum();
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*again, *first);
}

TEST_F(AggregatorPairTest, RestartMidRoundLosesNothingAndCountsOnce) {
  Start(/*sqlite=*/true);
  OpenBoth();
  std::vector<uint64_t> expected;
  for (uint64_t s = 1; s <= 4; ++s) {
    TestReport r = Report(s);
    UploadBoth(r);
    AddInto(expected, r.dense);
  }
  ASSERT_THAT(leader_->ProcessPending("task"), IsOk());  // 4 counted
  TestReport late = Report(5);
  UploadBoth(late);  // pending at the restart
  AddInto(expected, late.dense);
  Start(/*sqlite=*/true);  // both daemons restart from their files
  TestReport after = Report(6);
  UploadBoth(after);
  AddInto(expected, after.dense);
  uint64_t count = 0;
  auto sum = FinalizeSum(&count);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(count, 6u);
  EXPECT_EQ(*sum, expected);
}

TEST(AggregatorCreate, ValidatesSeams) {
  FakeClock clock;
  auto rng = DeterministicRandom::FromSeed(1);
  AggregatorOptions leader;
  leader.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  EXPECT_THAT(Aggregator::Create(leader, InMemoryFactory(), nullptr, &clock, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  AggregatorOptions bad;
  bad.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  bad.role = Role::kHelper;
  bad.verify_batch_size = 0;
  EXPECT_THAT(Aggregator::Create(bad, InMemoryFactory(), nullptr, &clock, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseRole("boss"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AggregatorPairTest, BadRoundParametersAreRejected) {
  proto::RoundParameters p = params_;
  p.set_dimension(p.dimension() + 1);
  EXPECT_THAT(leader_->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = params_;
  p.set_task_id("../etc");
  EXPECT_THAT(leader_->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = params_;
  p.set_noise_variance(0.5);
  EXPECT_THAT(leader_->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
  OpenBoth();
  p = params_;
  p.set_max_reports(7);
  EXPECT_THAT(leader_->OpenRound(p), StatusIs(absl::StatusCode::kAlreadyExists));
}

}  // namespace
}  // namespace tandem::aggregator
