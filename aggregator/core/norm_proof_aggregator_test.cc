// Two Aggregators wired in-process on a round with a norm bound: honest
// reports are counted, reports over the bound or with tampered proofs are
// rejected by both servers together and never reach the sum.
#include <map>

#include "aggregator/core/aggregator.h"
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
using ::tandem::aggregator::testing::MakeNormRoundParameters;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeReportWithValues;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::aggregator::testing::SumShares;
using ::tandem::aggregator::testing::TestReport;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

constexpr uint32_t kLogBlocks = 3, kBlock = 8, kGroups = 4;

class NormRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AggregatorOptions lo, ho;
    lo.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
    ho.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
    lo.role = Role::kLeader;
    lo.verify_batch_size = 4;
    ho.role = Role::kHelper;
    helper_ = Aggregator::Create(ho, InMemoryFactory(), nullptr, &clock_, noise_.get()).value();
    channel_.set_helper(helper_.get());
    leader_ = Aggregator::Create(lo, InMemoryFactory(), &channel_, &clock_, noise_.get()).value();
    params_ = MakeNormRoundParameters("task", 1, kLogBlocks, kBlock, kGroups, 200, 500);
    TANDEM_ASSERT_OK(leader_->OpenRound(params_));
    TANDEM_ASSERT_OK(helper_->OpenRound(params_));
  }

  void UploadBoth(const TestReport& r) {
    TANDEM_EXPECT_OK(leader_->Upload(r.to_leader));
    TANDEM_EXPECT_OK(helper_->Upload(r.to_helper));
  }

  std::vector<int64_t> SmallValues(uint64_t seed) {
    auto rng = DeterministicRandom::FromSeed(seed);
    std::vector<int64_t> v(kGroups * kBlock);
    for (auto& x : v) x = static_cast<int64_t>(rng->NextUint64().value() % 7) - 3;
    return v;
  }

  // Finalizes both; returns the sum, checks both agree on counts.
  std::vector<uint64_t> Finalize(uint64_t expected_count) {
    proto::FinalizeRequest req;
    req.set_task_id("task");
    req.set_round_id(1);
    auto a = leader_->Finalize(req);
    auto b = helper_->Finalize(req);
    EXPECT_THAT(a, IsOk());
    EXPECT_THAT(b, IsOk());
    EXPECT_EQ(a->accepted_reports(), expected_count);
    EXPECT_EQ(b->accepted_reports(), expected_count);
    return SumShares(*a, *b).value();
  }

  uint64_t Rejected(Aggregator& a) {
    proto::AggregatorStatusRequest req;
    req.set_task_id("task");
    return a.Status(req).value().rejected_reports();
  }

  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> noise_ = DeterministicRandom::FromSeed(7);
  InProcessPeerChannel channel_;
  std::unique_ptr<Aggregator> leader_, helper_;
  proto::RoundParameters params_;
};

TEST_F(NormRoundTest, HonestReportsAreCountedExactly) {
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 9; ++seed) {
    auto r = MakeReportWithValues(params_, SmallValues(seed), seed);
    ASSERT_THAT(r, IsOk());
    UploadBoth(*r);
    AddInto(expected, r->dense);
  }
  auto factory = MakeReport(params_, 100);  // the factory's own small reports
  ASSERT_THAT(factory, IsOk());
  UploadBoth(*factory);
  AddInto(expected, factory->dense);
  EXPECT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(10));
  EXPECT_EQ(Finalize(10), expected);
  EXPECT_EQ(Rejected(*leader_), 0u);
}

TEST_F(NormRoundTest, BadReportsAreRejectedByBothAndNeverCounted) {
  std::vector<uint64_t> expected;
  std::vector<TestReport> bad;
  // Over the block bound (15^2 = 225 > 200) and far over (2^30), with the
  // proof a cheating client sends.
  for (int64_t big : {int64_t{15}, int64_t{1} << 30}) {
    std::vector<int64_t> v = SmallValues(50 + big % 7);
    v[0] = big;
    EXPECT_THAT(MakeReportWithValues(params_, v, 60).status(),
                StatusIs(absl::StatusCode::kInvalidArgument));  // no honest proof
    bad.push_back(MakeReportWithValues(params_, v, 61 + big % 5, /*cheat=*/true).value());
  }
  // A flipped proof share and a flipped witness share of honest reports.
  TestReport flipped = MakeReportWithValues(params_, SmallValues(70), 70).value();
  auto* p = flipped.to_leader.mutable_norm_proof();
  p->set_proof(3, (p->proof(3) + 1) % ((uint64_t{1} << 61) - 1));
  bad.push_back(flipped);
  TestReport witness = MakeReportWithValues(params_, SmallValues(71), 71).value();
  auto* w = witness.to_helper.mutable_norm_proof();
  w->mutable_seed()->at(2) ^= 4;
  bad.push_back(witness);
  // Inconsistent: the proofs of a small report on the keys of a large one.
  std::vector<int64_t> large = SmallValues(72);
  large[9] = 1 << 20;
  TestReport mixed = MakeReportWithValues(params_, large, 73, /*cheat=*/true).value();
  TestReport donor = MakeReportWithValues(params_, SmallValues(74), 74).value();
  *mixed.to_leader.mutable_norm_proof() = donor.to_leader.norm_proof();
  *mixed.to_helper.mutable_norm_proof() = donor.to_helper.norm_proof();
  bad.push_back(mixed);
  for (const TestReport& r : bad) UploadBoth(r);
  for (uint64_t seed = 80; seed < 83; ++seed) {
    TestReport good = MakeReportWithValues(params_, SmallValues(seed), seed).value();
    UploadBoth(good);
    AddInto(expected, good.dense);
  }
  EXPECT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(8));
  EXPECT_EQ(Rejected(*leader_), bad.size());
  EXPECT_EQ(Rejected(*helper_), bad.size());
  EXPECT_EQ(Finalize(3), expected);
}

// Mostly honest batches are counted from the check's own expansion (no
// second one); the few rejected reports are taken back out exactly.
TEST_F(NormRoundTest, AFewRejectedReportsAreTakenBackOutOfTheCheckedSum) {
  std::vector<uint64_t> expected;
  for (uint64_t seed = 90; seed < 96; ++seed) {
    TestReport good = MakeReportWithValues(params_, SmallValues(seed), seed).value();
    UploadBoth(good);
    AddInto(expected, good.dense);
  }
  TestReport flipped = MakeReportWithValues(params_, SmallValues(97), 97).value();
  auto* p = flipped.to_leader.mutable_norm_proof();
  p->set_proof(1, (p->proof(1) + 1) % ((uint64_t{1} << 61) - 1));
  UploadBoth(flipped);
  EXPECT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(7));
  EXPECT_EQ(Rejected(*leader_), 1u);
  EXPECT_EQ(Rejected(*helper_), 1u);
  // One expansion per report on each server (the proof check's), and one
  // more for the rejected report only.
  for (Aggregator* a : {leader_.get(), helper_.get()}) {
    proto::AggregatorStatusRequest req;
    req.set_task_id("task");
    const proto::AggregatorStatusResponse st = a->Status(req).value();
    EXPECT_EQ(st.share_expansions(), 7u) << st.role();
    EXPECT_EQ(st.undo_expansions(), 1u) << st.role();
    EXPECT_EQ(st.check_evaluations(), 0u) << st.role();
  }
  EXPECT_EQ(Finalize(6), expected);
}

TEST_F(NormRoundTest, ReplaysAreNotCountedTwice) {
  TestReport r = MakeReportWithValues(params_, SmallValues(90), 90).value();
  UploadBoth(r);
  UploadBoth(r);  // identical retry: idempotent
  // The same keys and proof under a fresh report id.
  TestReport replay = r;
  replay.to_leader.set_report_id(std::string(16, 'x'));
  replay.to_helper.set_report_id(std::string(16, 'x'));
  UploadBoth(replay);
  EXPECT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(2));
  EXPECT_EQ(Rejected(*helper_), 1u);
  EXPECT_EQ(Finalize(1), r.dense);
}

TEST_F(NormRoundTest, UploadsAreValidatedAgainstTheRound) {
  TestReport r = MakeReportWithValues(params_, SmallValues(91), 91).value();
  proto::UploadRequest missing = r.to_leader;
  missing.clear_norm_proof();
  EXPECT_THAT(leader_->Upload(missing).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // The helper's share offered to the leader has the wrong shape.
  proto::UploadRequest swapped = r.to_leader;
  *swapped.mutable_norm_proof() = r.to_helper.norm_proof();
  EXPECT_THAT(leader_->Upload(swapped).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // Rounds without a norm bound keep refusing proofs.
  proto::RoundParameters plain = MakeRoundParameters("plain", 1, kLogBlocks, kBlock, kGroups);
  TANDEM_ASSERT_OK(leader_->OpenRound(plain));
  TestReport p = MakeReport(plain, 5).value();
  *p.to_leader.mutable_norm_proof() = r.to_leader.norm_proof();
  EXPECT_THAT(leader_->Upload(p.to_leader).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(NormRoundTest, HelperAnswersOnlyAtTheFirstQuerySeed) {
  TestReport r = MakeReportWithValues(params_, SmallValues(92), 92).value();
  UploadBoth(r);
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(1));
  proto::VerifyRequest req;
  req.set_task_id("task");
  req.set_round_id(1);
  req.set_proof_query_seed(std::string(32, 'n'));
  auto response = helper_->HandleVerify(req);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->proof_query_seed().size(), 32u);
  EXPECT_NE(response->proof_query_seed(), req.proof_query_seed());
  req.set_proof_query_seed("short");
  EXPECT_THAT(helper_->HandleVerify(req).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::aggregator
