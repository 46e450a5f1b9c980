// The aggregator's own trust rules, on two in-process Aggregators over real
// SQLite stores: upload tickets (and that both servers must hold the same
// ticket), the per-task privacy budget kept across restarts, and the
// policy's minimum batch. The SIGKILL tests of Finalize are in
// finalize_crash_test.cc.
#include <filesystem>
#include <vector>
#include <limits>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "base/testing/status_matchers.h"
#include "crypto/dp/accountant.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::AttachTicket;
using ::tandem::aggregator::testing::MakeNormRoundParameters;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeReportWithValues;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::aggregator::testing::TestReport;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-trust-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto key = crypto::Ed25519SigningKey::Generate(key_random_.get());
    ASSERT_THAT(key, IsOk());
    key_ = std::make_unique<crypto::Ed25519SigningKey>(*std::move(key));
    auto verifying = key_->VerifyingKey();
    ASSERT_THAT(verifying, IsOk());
    verifying_ = std::make_shared<const crypto::Ed25519VerifyingKey>(*std::move(verifying));
    policy_.min_batch_size = 3;
    policy_.require_norm_proofs = false;  // the budget and tickets are what is tested
    params_ = MakeRoundParameters("task", 1, /*log_num_blocks=*/2, /*block_size=*/4,
                                  /*num_groups=*/2);
    params_.mutable_dp()->set_min_batch_size(3);
    SetNoiseMultiplier(params_, 2.0);
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  // sigma = z * clip * 2^fractional_bits (no norm bound in these rounds).
  static void SetNoiseMultiplier(proto::RoundParameters& p, double z) {
    const double sigma = z * p.fixed_point().clip_l2_norm() * 65536.0;
    p.set_noise_variance(sigma * sigma);
  }

  void Start() {
    leader_.reset();
    helper_.reset();
    std::filesystem::create_directories(dir_ + "/leader");
    std::filesystem::create_directories(dir_ + "/helper");
    AggregatorOptions o;
    o.policies = PolicySet::Uniform(policy_);
    o.ticket_key = verifying_;
    o.previous_ticket_keys = previous_keys_;
    o.max_clock_skew = max_clock_skew_;
    o.role = Role::kHelper;
    auto h = Aggregator::Create(o, MakeSqliteStoreFactory(dir_ + "/helper"), nullptr, &clock_,
                                noise_.get());
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    channel_.set_helper(helper_.get());
    o.role = Role::kLeader;
    auto l = Aggregator::Create(o, MakeSqliteStoreFactory(dir_ + "/leader"), &channel_, &clock_,
                                noise_.get());
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
  }

  absl::Status OpenBoth(const proto::RoundParameters& p) {
    TANDEM_RETURN_IF_ERROR(leader_->OpenRound(p));
    return helper_->OpenRound(p);
  }
  TestReport Ticketed(const proto::RoundParameters& p, uint64_t seed) {
    TestReport r = MakeReport(p, seed).value();
    EXPECT_THAT(AttachTicket(r, p, *key_, Expiry()), IsOk());
    return r;
  }
  // Ticketed reports of seeds first..last, uploaded to both servers.
  void UploadTicketed(const proto::RoundParameters& p, uint64_t first, uint64_t last) {
    for (uint64_t seed = first; seed <= last; ++seed) {
      TestReport r = Ticketed(p, seed);
      TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
      TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
    }
  }
  int64_t Expiry() const { return absl::ToUnixMillis(clock_.Now() + absl::Minutes(5)); }
  absl::StatusOr<proto::FinalizeResponse> Finalize(Aggregator& a, uint64_t round) {
    proto::FinalizeRequest req;
    req.set_task_id("task");
    req.set_round_id(round);
    return a.Finalize(req);
  }
  // Runs round `round` with `n` ticketed reports to its release.
  void ReleaseRound(uint64_t round, int n) {
    proto::RoundParameters p = params_;
    p.set_round_id(round);
    TANDEM_ASSERT_OK(OpenBoth(p));
    UploadTicketed(p, round * 100, round * 100 + static_cast<uint64_t>(n) - 1);
    auto a = Finalize(*leader_, round);
    ASSERT_THAT(a, IsOk());
    auto b = Finalize(*helper_, round);
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(a->accepted_reports(), static_cast<uint64_t>(n));
    EXPECT_EQ(b->accepted_reports(), static_cast<uint64_t>(n));
  }
  proto::AggregatorStatusResponse StatusOf(Aggregator& a) {
    proto::AggregatorStatusRequest req;
    req.set_task_id("task");
    return a.Status(req).value();
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> noise_ = DeterministicRandom::FromSeed(7);
  std::unique_ptr<DeterministicRandom> key_random_ = DeterministicRandom::FromSeed(8);
  std::unique_ptr<crypto::Ed25519SigningKey> key_;
  std::vector<crypto::Ed25519VerifyingKey> previous_keys_;  // rotation
  absl::Duration max_clock_skew_ = absl::Minutes(5);
  std::shared_ptr<const crypto::Ed25519VerifyingKey> verifying_;
  Policy policy_;
  InProcessPeerChannel channel_;
  std::unique_ptr<Aggregator> leader_, helper_;
  proto::RoundParameters params_;
};

TEST_F(TrustTest, UploadsNeedAValidUnexpiredTicketForThisReport) {
  Start();
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport r = MakeReport(params_, 1).value();
  EXPECT_THAT(leader_->Upload(r.to_leader), StatusIs(absl::StatusCode::kUnauthenticated));
  TANDEM_ASSERT_OK(AttachTicket(r, params_, *key_, Expiry()));
  proto::UploadRequest renamed = r.to_leader;
  renamed.set_report_id(std::string(16, 'z'));  // the ticket names another id
  EXPECT_THAT(leader_->Upload(renamed),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("report")));
  const absl::Time now = clock_.Now();
  clock_.Advance(absl::Minutes(11));  // past the expiry and the 5 min of skew tolerated
  EXPECT_THAT(leader_->Upload(r.to_leader),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("expired")));
  clock_.SetTime(now);
  TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
  EXPECT_EQ(StatusOf(*leader_).pending_reports(), 1u);
}

// Issue 37: expiry and deadline are set on the coordinator's clock and
// checked on this server's, which may run ahead: uploads are accepted up to
// max_clock_skew past them, and refused beyond with a message that names
// the clock; with no tolerance, at the first millisecond past them.
TEST_F(TrustTest, TicketsAndDeadlinesTolerateTheConfiguredClockSkew) {
  for (const absl::Duration skew : {absl::Minutes(5), absl::ZeroDuration()}) {
    SCOPED_TRACE(absl::FormatDuration(skew));
    max_clock_skew_ = skew;
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);  // a fresh pair each time
    Start();
    const absl::Time opened = clock_.Now();
    proto::RoundParameters p = params_;
    p.set_deadline_unix_ms(absl::ToUnixMillis(opened + absl::Minutes(1)));
    TANDEM_ASSERT_OK(OpenBoth(p));
    TestReport expiring = MakeReport(p, 1).value();  // ticket expiry = the deadline
    TANDEM_ASSERT_OK(AttachTicket(expiring, p, *key_, p.deadline_unix_ms()));
    TestReport lasting = MakeReport(p, 2).value();  // expiry past the deadline
    TANDEM_ASSERT_OK(AttachTicket(lasting, p, *key_, p.deadline_unix_ms() + 3600000));
    clock_.SetTime(opened + absl::Minutes(1) + absl::Milliseconds(1));
    if (skew == absl::ZeroDuration()) {
      EXPECT_THAT(leader_->Upload(expiring.to_leader),
                  StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("expired")));
      EXPECT_THAT(leader_->Upload(lasting.to_leader),
                  StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("past its deadline")));
      EXPECT_EQ(StatusOf(*leader_).max_clock_skew_ms(), 0);
      continue;
    }
    clock_.SetTime(opened + absl::Minutes(5));  // 4 min past both, within 5
    TANDEM_ASSERT_OK(leader_->Upload(expiring.to_leader));
    TANDEM_ASSERT_OK(helper_->Upload(expiring.to_helper));
    clock_.SetTime(opened + absl::Minutes(6) + absl::Milliseconds(1));  // 5 min + 1 ms past
    TestReport late = MakeReport(p, 3).value();
    TANDEM_ASSERT_OK(AttachTicket(late, p, *key_, p.deadline_unix_ms()));
    EXPECT_THAT(leader_->Upload(late.to_leader),
                StatusIs(absl::StatusCode::kUnauthenticated,
                         HasSubstr("less the tolerated clock skew of 5m")));
    EXPECT_THAT(helper_->Upload(lasting.to_helper),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("past its deadline by this aggregator's clock")));
    const proto::AggregatorStatusResponse s = StatusOf(*leader_);
    EXPECT_EQ(s.pending_reports(), 1u);
    EXPECT_EQ(s.max_clock_skew_ms(), 300000);
    EXPECT_EQ(s.now_unix_ms(), absl::ToUnixMillis(clock_.Now()));
  }
}

TEST_F(TrustTest, ClockSkewToleranceIsBounded) {
  for (const absl::Duration bad : {absl::Milliseconds(-1), absl::Hours(1) + absl::Seconds(1)}) {
    AggregatorOptions o;
    o.max_clock_skew = bad;
    o.role = Role::kHelper;
    EXPECT_THAT(Aggregator::Create(o, MakeSqliteStoreFactory(dir_), nullptr, &clock_, noise_.get()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_clock_skew")));
  }
}

// Both tickets are genuine (the coordinator signed the same report id twice
// with different expiries), but the servers got different ones: the hash
// they compare binds the ticket, so neither counts the report.
// Issue 34 item 7: the coordinator's ticket key rotates with overlap: both
// servers accept tickets of the new key and of the old one they were given,
// and nothing else.
TEST_F(TrustTest, RotatedTicketKeysOverlapUntilTheOldOneIsDropped) {
  auto old_key = crypto::Ed25519SigningKey::Generate(key_random_.get());
  auto stranger = crypto::Ed25519SigningKey::Generate(key_random_.get());
  ASSERT_THAT(old_key, IsOk());
  ASSERT_THAT(stranger, IsOk());
  previous_keys_ = {*old_key->VerifyingKey()};
  Start();
  TANDEM_ASSERT_OK(OpenBoth(params_));
  auto upload_signed_by = [&](const crypto::Ed25519SigningKey& k, uint64_t seed) {
    TestReport r = MakeReport(params_, seed).value();
    EXPECT_THAT(AttachTicket(r, params_, k, Expiry()), IsOk());
    absl::Status a = leader_->Upload(r.to_leader).status();
    absl::Status b = helper_->Upload(r.to_helper).status();
    return a.ok() ? b : a;
  };
  TANDEM_EXPECT_OK(upload_signed_by(*key_, 1));     // the new key
  TANDEM_EXPECT_OK(upload_signed_by(*old_key, 2));  // the old one, still accepted
  EXPECT_THAT(upload_signed_by(*stranger, 3), StatusIs(absl::StatusCode::kUnauthenticated));
  // Once the old key is dropped its tickets are refused.
  previous_keys_.clear();
  Start();
  EXPECT_THAT(upload_signed_by(*old_key, 4), StatusIs(absl::StatusCode::kUnauthenticated));
  TANDEM_EXPECT_OK(upload_signed_by(*key_, 5));
}

TEST_F(TrustTest, ServersHoldingDifferentTicketsRejectTheReport) {
  Start();
  TANDEM_ASSERT_OK(OpenBoth(params_));
  UploadTicketed(params_, 1, 3);
  TestReport split = Ticketed(params_, 4);
  proto::UploadTicket other;
  other.set_task_id("task");
  other.set_round_id(1);
  other.set_ticket_id(split.to_helper.report_id());
  other.set_expiry_unix_ms(Expiry() + 1);
  // Issued to the same device, which signs the helper's upload under it.
  other.set_device_public_key(testing::TestDeviceKey(split).value().PublicKeyRaw());
  *split.to_helper.mutable_ticket() = crypto::SignUploadTicket(*key_, other).value();
  TANDEM_ASSERT_OK(testing::SignTestUploads(split));
  TANDEM_ASSERT_OK(leader_->Upload(split.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(split.to_helper));
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  for (Aggregator* a : {leader_.get(), helper_.get()}) {
    const proto::AggregatorStatusResponse s = StatusOf(*a);
    EXPECT_EQ(s.accepted_reports(), 3u);
    EXPECT_EQ(s.rejected_reports(), 1u);
  }
}

TEST_F(TrustTest, BudgetIsChargedPerReleaseKeptAcrossRestartsAndEnforced) {
  // z = 2, q = 1 at delta 1e-5: ~2.2 for one release, ~3.2 for two, ~4.0
  // for three; a budget of 3.8 fits two.
  policy_.epsilon_budget = 3.8;
  Start();
  ReleaseRound(1, 3);
  ReleaseRound(2, 3);
  auto accountant =
      dp::PrivacyAccountant::Create({dp::DefaultOrders(), 1e-5, std::numeric_limits<double>::max()});
  ASSERT_THAT(accountant, IsOk());
  TANDEM_ASSERT_OK(accountant->Charge(1.0, 2.0, 2));
  const double spent = accountant->SpentEpsilon();
  ASSERT_LT(spent, 3.8);
  EXPECT_DOUBLE_EQ(StatusOf(*helper_).epsilon_spent(), spent);
  proto::RoundParameters third = params_;
  third.set_round_id(3);
  EXPECT_THAT(leader_->OpenRound(third),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("budget")));
  // A restart rebuilds the ledger from the released rounds in the store.
  Start();
  for (Aggregator* a : {leader_.get(), helper_.get()}) {
    const proto::AggregatorStatusResponse s = StatusOf(*a);
    EXPECT_DOUBLE_EQ(s.epsilon_spent(), spent);
    EXPECT_EQ(s.released_rounds(), 2u);
    EXPECT_EQ(s.epsilon_budget(), 3.8);
  }
  EXPECT_THAT(helper_->OpenRound(third), StatusIs(absl::StatusCode::kFailedPrecondition));
  // More noise fits: z = 8 costs little.
  SetNoiseMultiplier(third, 8.0);
  TANDEM_EXPECT_OK(OpenBoth(third));
}

TEST_F(TrustTest, AbandonedRoundsAreNotChargedAndNeverReleased) {
  Start();
  TANDEM_ASSERT_OK(OpenBoth(params_));
  UploadTicketed(params_, 1, 3);
  proto::RoundParameters next = params_;
  next.set_round_id(2);
  TANDEM_ASSERT_OK(OpenBoth(next));  // round 1 abandoned
  EXPECT_EQ(StatusOf(*leader_).epsilon_spent(), 0.0);
  EXPECT_EQ(StatusOf(*leader_).released_rounds(), 0u);
  EXPECT_THAT(Finalize(*leader_, 1).status(), StatusIs(absl::StatusCode::kNotFound));
  Start();  // after a restart too: nothing of round 1 can be released
  EXPECT_EQ(StatusOf(*leader_).released_rounds(), 0u);
}

// The coordinator abandons the round of a deleted task: closed, never
// released, nothing more accepted, also after a restart; a released round
// cannot be abandoned.
TEST_F(TrustTest, AnAbandonedRoundIsClosedUnreleasedForGood) {
  Start();
  TANDEM_ASSERT_OK(OpenBoth(params_));
  UploadTicketed(params_, 1, 3);
  TANDEM_ASSERT_OK(leader_->AbandonRound("task", 1));
  TANDEM_ASSERT_OK(leader_->AbandonRound("task", 1));  // a retry
  EXPECT_THAT(leader_->AbandonRound("task", 2), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(leader_->AbandonRound("no-such-task", 1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Finalize(*leader_, 1).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("without release")));
  TestReport late = Ticketed(params_, 9);
  EXPECT_FALSE(leader_->Upload(late.to_leader).ok());
  EXPECT_EQ(StatusOf(*leader_).released_rounds(), 0u);
  EXPECT_EQ(StatusOf(*leader_).epsilon_spent(), 0.0);
  Start();  // after a restart too
  EXPECT_THAT(Finalize(*leader_, 1).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ReleaseRound(2, 3);
  EXPECT_THAT(helper_->AbandonRound("task", 2),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
  TANDEM_ASSERT_OK(helper_->AbandonRound("task", 1));  // superseded: nothing to do
}

TEST_F(TrustTest, ServerMinimumBatchWinsOverTheRounds) {
  policy_.min_batch_size = 5;
  Start();
  EXPECT_THAT(leader_->OpenRound(params_),  // asks for 3
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_batch_size")));
  params_.mutable_dp()->set_min_batch_size(5);
  TANDEM_ASSERT_OK(OpenBoth(params_));
  UploadTicketed(params_, 1, 4);
  EXPECT_THAT(Finalize(*leader_, 1).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(StatusOf(*leader_).released_rounds(), 0u);
}

// The helper keeps the round's first FLP query seed durably: after a
// restart it still answers at that seed only, so a leader cannot collect a
// second set of query points for a pending report (the proof hides the
// report from one set only).
TEST_F(TrustTest, HelperAnswersAtTheFirstQuerySeedAfterARestart) {
  Start();
  proto::RoundParameters p = MakeNormRoundParameters("task", 1, /*log_num_blocks=*/2,
                                                     /*block_size=*/4, /*num_groups=*/2, 200, 500);
  p.mutable_dp()->set_min_batch_size(3);
  p.set_noise_variance(4.0 * 500);  // z = 2 against the proved bound
  TANDEM_ASSERT_OK(OpenBoth(p));
  auto proved = [&](uint64_t seed) {
    std::vector<int64_t> v(8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((seed + i) % 7) - 3;
    TestReport r = MakeReportWithValues(p, v, seed).value();
    EXPECT_THAT(AttachTicket(r, p, *key_, Expiry()), IsOk());
    return r;
  };
  TestReport first = proved(1);
  TANDEM_ASSERT_OK(leader_->Upload(first.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(first.to_helper));
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());  // the helper binds the seed
  TestReport second = proved(2);
  TANDEM_ASSERT_OK(leader_->Upload(second.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(second.to_helper));
  Start();  // both restart; the leader would draw a new seed
  proto::VerifyRequest ask;
  ask.set_task_id("task");
  ask.set_round_id(1);
  ask.set_proof_query_seed(std::string(32, 'x'));
  proto::ReportCheck* c = ask.add_checks();
  c->set_report_id(second.to_helper.report_id());
  c->set_proof_hash(std::string(32, '\0'));
  c->set_state(proto::PEER_REPORT_PENDING);
  absl::StatusOr<proto::VerifyResponse> answer = helper_->HandleVerify(ask);
  ASSERT_THAT(answer, IsOk());
  EXPECT_EQ(answer->checks_size(), 0);  // nothing evaluated at the new seed
  ASSERT_EQ(answer->proof_query_seed().size(), 32u);
  EXPECT_NE(answer->proof_query_seed(), ask.proof_query_seed());
  // The restarted leader adopts the helper's seed and the report is counted.
  TANDEM_ASSERT_OK(leader_->ProcessPending("task").status());
  EXPECT_EQ(StatusOf(*leader_).accepted_reports(), 2u);
  EXPECT_EQ(StatusOf(*helper_).accepted_reports(), 2u);
}

}  // namespace
}  // namespace tandem::aggregator
