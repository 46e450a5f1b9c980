// Two Aggregators wired in-process on dense rounds (RoundParameters.encoding
// DENSE, crypto/dense/dense_sharing.h): honest dense reports are counted
// exactly, reports over the bound or tampered are rejected by both servers
// together, and a client that sends the other encoding's share, or a share
// meant for the other server, is refused at upload (INVALID_ARGUMENT).
#include <map>
#include <string>
#include <vector>

#include "aggregator/core/aggregator.h"
#include "aggregator/store/in_memory_report_store.h"
#include "aggregator/testing/in_memory_store_factory.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/proof/dense_norm_proof.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::InMemoryFactory;
using ::tandem::aggregator::testing::MakeDenseReport;
using ::tandem::aggregator::testing::MakeDenseRoundParameters;
using ::tandem::aggregator::testing::MakeNormRoundParameters;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::SumShares;
using ::tandem::aggregator::testing::TestReport;
using ::tandem::testing::IsOk;
using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kDim = 100;
constexpr uint64_t kBound = 400;

proto::RoundParameters DenseRound(const std::string& task, bool proofs) {
  return MakeDenseRoundParameters(task, 1, kDim, proofs ? kBound : 0);
}

TestReport Make(const proto::RoundParameters& p, const std::vector<int64_t>& v, uint64_t id,
                const std::vector<uint64_t>* witness = nullptr) {
  absl::StatusOr<TestReport> r = MakeDenseReport(p, v, id, witness);
  EXPECT_THAT(r, IsOk());
  return r.ok() ? *std::move(r) : TestReport();
}

std::vector<int64_t> Small(uint64_t seed) {
  std::vector<int64_t> v(kDim);
  for (uint64_t i = 0; i < kDim; ++i) v[i] = static_cast<int64_t>((i * 7 + seed) % 5) - 2;
  return v;  // norm^2 <= 4 * 100 = 400
}

class DenseRoundTest : public ::testing::TestWithParam<bool> {
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
    params_ = DenseRound("task", GetParam());
    TANDEM_ASSERT_OK(leader_->OpenRound(params_));
    TANDEM_ASSERT_OK(helper_->OpenRound(params_));
  }

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

  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> noise_ = DeterministicRandom::FromSeed(7);
  InProcessPeerChannel channel_;
  std::unique_ptr<Aggregator> leader_, helper_;
  proto::RoundParameters params_;
};

TEST_P(DenseRoundTest, HonestDenseReportsAreCountedExactly) {
  std::vector<uint64_t> expected(kDim, 0);
  for (uint64_t i = 1; i <= 9; ++i) {
    TestReport r = Make(params_, Small(i), i);
    TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
    TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
    for (uint64_t j = 0; j < kDim; ++j) expected[j] += r.dense[j];
  }
  EXPECT_THAT(leader_->ProcessPending("task"), IsOkAndHolds(9));
  EXPECT_EQ(Finalize(9), expected);
}

TEST_P(DenseRoundTest, TheOtherEncodingOrTheOtherServersShareIsRefused) {
  TestReport r = Make(params_, Small(1), 1);
  // A PREAMBLE key share in a dense round (what a client that lies about
  // the round's encoding sends).
  proto::RoundParameters preamble = MakeNormRoundParameters("task", 1, 1, 50, 1, kBound, kBound);
  auto keys = MakeReport(preamble, 5);
  ASSERT_THAT(keys, IsOk());
  proto::UploadRequest wrong = r.to_leader;
  wrong.clear_dense_share();
  *wrong.mutable_key_share() = keys->to_leader.key_share();
  EXPECT_THAT(leader_->Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // Both shares at once.
  wrong = r.to_leader;
  *wrong.mutable_key_share() = keys->to_leader.key_share();
  EXPECT_THAT(leader_->Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // The helper's share sent to the leader and the leader's to the helper.
  proto::UploadRequest swapped = r.to_leader;
  *swapped.mutable_dense_share() = r.to_helper.dense_share();
  EXPECT_THAT(leader_->Upload(swapped).status().message(), HasSubstr("party 1"));
  swapped = r.to_helper;
  *swapped.mutable_dense_share() = r.to_leader.dense_share();
  EXPECT_THAT(helper_->Upload(swapped), StatusIs(absl::StatusCode::kInvalidArgument));
  // A leader share of another length.
  wrong = r.to_leader;
  wrong.mutable_dense_share()->mutable_values()->resize(8 * (kDim - 1));
  EXPECT_THAT(leader_->Upload(wrong).status().message(), HasSubstr("800 bytes"));
  // Nothing was stored: the honest report still goes through, alone.
  TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
  EXPECT_THAT(leader_->ProcessPending("task"), IsOkAndHolds(1));
  std::vector<uint64_t> expected = r.dense;
  EXPECT_EQ(Finalize(1), expected);
}

TEST_P(DenseRoundTest, AReportSentToOneServerOnlyIsNeverCounted) {
  TestReport a = Make(params_, Small(1), 1);
  TestReport b = Make(params_, Small(2), 2);
  TANDEM_ASSERT_OK(leader_->Upload(a.to_leader));
  TANDEM_ASSERT_OK(helper_->Upload(a.to_helper));
  TANDEM_ASSERT_OK(leader_->Upload(b.to_leader));  // never reaches the helper
  ASSERT_THAT(leader_->ProcessPending("task"), IsOk());
  EXPECT_EQ(Finalize(1), a.dense);
}

TEST_P(DenseRoundTest, OverBoundAndTamperedReportsAreRejectedByBoth) {
  if (!GetParam()) GTEST_SKIP() << "a round without proofs checks no bound";
  TestReport honest = Make(params_, Small(3), 1);
  // Over the bound (21^2 = 441 > 400) with a made-up all-zero witness.
  std::vector<int64_t> big(kDim, 0);
  big[7] = 21;
  auto sys = crypto::proof::DenseNormProof::Create(kDim, 64, params_.norm_bound()).value();
  std::vector<uint64_t> witness(sys.circuit().witness_length(), 0);
  TestReport over = Make(params_, big, 2, &witness);
  // An honest proof whose leader share was then changed.
  TestReport tampered = Make(params_, Small(4), 3);
  (*tampered.to_leader.mutable_dense_share()->mutable_values())[5] ^= 1;
  for (const TestReport* r : {&honest, &over, &tampered}) {
    TANDEM_ASSERT_OK(leader_->Upload(r->to_leader));
    TANDEM_ASSERT_OK(helper_->Upload(r->to_helper));
  }
  ASSERT_THAT(leader_->ProcessPending("task"), IsOk());
  EXPECT_EQ(Finalize(1), honest.dense);
  proto::AggregatorStatusRequest s;
  s.set_task_id("task");
  EXPECT_EQ(leader_->Status(s).value().rejected_reports(), 2u);
  EXPECT_EQ(helper_->Status(s).value().rejected_reports(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Proofs, DenseRoundTest, ::testing::Bool());

TEST(DenseRoundProofTest, DenseRoundParametersAreChecked) {
  FakeClock clock;
  auto noise = DeterministicRandom::FromSeed(7);
  AggregatorOptions o;
  o.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  o.role = Role::kHelper;
  auto agg = Aggregator::Create(o, InMemoryFactory(), nullptr, &clock, noise.get()).value();
  proto::RoundParameters p = DenseRound("task", true);
  p.mutable_group_parameters()->set_value_bits(16);
  EXPECT_THAT(agg->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = DenseRound("task", true);
  p.set_dimension((uint64_t{1} << 20) + 1);  // proofs take D <= 2^20
  EXPECT_THAT(agg->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = DenseRound("task", true);
  p.set_encoding(static_cast<proto::ReportEncoding>(7));
  EXPECT_THAT(agg->OpenRound(p), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::aggregator
