// Dense rounds end to end (RoundParameters.encoding DENSE): two real
// tandem-aggregator processes on loopback, honest and malicious clients over
// gRPC. Honest dense reports are summed exactly, also across a SIGKILL of
// the leader after the uploads; reports over the bound, with a changed share
// or a borrowed proof are rejected by both daemons; a client that sends the
// other encoding's share (or lies about which one the round uses) is refused
// with INVALID_ARGUMENT at upload and nothing of it is stored.
#include <grpcpp/grpcpp.h>

#include <filesystem>

#include "aggregator/testing/report_factory.h"
#include "base/testing/status_matchers.h"
#include "crypto/proof/dense_norm_proof.h"
#include "gtest/gtest.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::AddInto;
using aggregator::testing::MakeDenseReport;
using aggregator::testing::MakeDenseRoundParameters;
using aggregator::testing::MakeNormRoundParameters;
using aggregator::testing::MakeReport;
using aggregator::testing::SumShares;
using aggregator::testing::TestReport;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;
using ::tandem::testing::StatusIs;
using Endpoint = ::tandem::testing::AggregatorEndpoint;

constexpr uint64_t kDim = 300;
constexpr uint64_t kBound = 1200;

class DenseEncodingDaemonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-dense");
    ASSERT_FALSE(dir_.empty());
    auto h = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, Args("helper"), dir_ + "/helper.log");
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    helper_ep_ = Connect(helper_->port());
    StartLeader();
    params_ = MakeDenseRoundParameters("dense-task", 1, kDim, kBound);
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartLeader() {
    std::vector<std::string> args = Args("leader");
    args.push_back("--peer=" + Loopback(helper_->port()));
    auto l = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, args, dir_ + "/leader.log");
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
    leader_ep_ = Connect(leader_->port());
  }
  static Endpoint Connect(int port) {
    return Endpoint::Connect(Loopback(port), grpc::InsecureChannelCredentials());
  }
  std::vector<std::string> Args(const std::string& role) {
    return tandem::testing::BareAggregatorArgs(role, dir_);
  }
  absl::Status UploadBoth(const TestReport& r) {
    if (absl::Status s = leader_ep_.Upload(r.to_leader); !s.ok()) return s;
    return helper_ep_.Upload(r.to_helper);
  }
  static std::vector<int64_t> Values(uint64_t seed) {
    std::vector<int64_t> v(kDim);
    for (uint64_t i = 0; i < kDim; ++i) v[i] = static_cast<int64_t>((i * 13 + seed) % 5) - 2;
    return v;  // norm^2 <= 4 * 300 = 1200
  }

  std::string dir_;
  proto::RoundParameters params_;
  std::unique_ptr<DaemonProcess> leader_, helper_;
  Endpoint leader_ep_, helper_ep_;
};

TEST_F(DenseEncodingDaemonsTest, HonestCountedMaliciousRejectedAcrossALeaderCrash) {
  TANDEM_ASSERT_OK(leader_ep_.Open(params_));
  TANDEM_ASSERT_OK(helper_ep_.Open(params_));
  std::vector<uint64_t> expected;
  const int honest = 10;
  for (uint64_t id = 1; id <= honest; ++id) {
    auto r = MakeDenseReport(params_, Values(id), id);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(UploadBoth(*r));
    AddInto(expected, r->dense);
  }
  // Over the bound (35^2 = 1225 > 1200) with a made-up witness; an honest
  // report whose leader share was then changed; a report over the bound
  // carrying another report's (honest) proof.
  std::vector<int64_t> over(kDim, 0);
  over[17] = 35;
  auto sys = crypto::proof::DenseNormProof::Create(kDim, 64, params_.norm_bound()).value();
  const std::vector<uint64_t> zeros(sys.circuit().witness_length(), 0);
  std::vector<TestReport> bad;
  bad.push_back(MakeDenseReport(params_, over, 101, &zeros).value());
  TestReport changed = MakeDenseReport(params_, Values(102), 102).value();
  (*changed.to_leader.mutable_dense_share()->mutable_values())[9] ^= 0x10;
  bad.push_back(changed);
  TestReport borrowed = MakeDenseReport(params_, over, 103, &zeros).value();
  TestReport donor = MakeDenseReport(params_, Values(104), 103).value();  // same id
  *borrowed.to_leader.mutable_norm_proof() = donor.to_leader.norm_proof();
  *borrowed.to_helper.mutable_norm_proof() = donor.to_helper.norm_proof();
  bad.push_back(borrowed);
  for (const TestReport& r : bad) TANDEM_ASSERT_OK(UploadBoth(r));

  // The leader dies before anything is verified; its restart keeps every
  // upload it acknowledged.
  leader_->Kill();
  StartLeader();
  auto a = leader_ep_.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(a, IsOk());
  auto b = helper_ep_.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), static_cast<uint64_t>(honest));
  EXPECT_EQ(b->accepted_reports(), static_cast<uint64_t>(honest));
  auto sum = SumShares(*a, *b);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);
  for (const Endpoint* ep : {&leader_ep_, &helper_ep_}) {
    auto s = ep->Status(params_.task_id());
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->rejected_reports(), bad.size());
    EXPECT_EQ(s->accepted_reports(), static_cast<uint64_t>(honest));
  }
}

TEST_F(DenseEncodingDaemonsTest, AClientThatMixesOrLiesAboutTheEncodingIsRefused) {
  TANDEM_ASSERT_OK(leader_ep_.Open(params_));
  TANDEM_ASSERT_OK(helper_ep_.Open(params_));
  // A PREAMBLE round of another task beside it.
  const proto::RoundParameters preamble =
      MakeNormRoundParameters("preamble-task", 1, 2, 16, 4, 400, 1200);
  TANDEM_ASSERT_OK(leader_ep_.Open(preamble));
  TANDEM_ASSERT_OK(helper_ep_.Open(preamble));
  TestReport dense = MakeDenseReport(params_, Values(1), 1).value();
  TestReport keys = MakeReport(preamble, 2).value();

  // Key shares into the dense round (the client claims PREAMBLE).
  proto::UploadRequest wrong = keys.to_leader;
  wrong.set_task_id(params_.task_id());
  EXPECT_THAT(leader_ep_.Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // Dense shares into the PREAMBLE round.
  wrong = dense.to_leader;
  wrong.set_task_id(preamble.task_id());
  EXPECT_THAT(leader_ep_.Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // Both kinds in one upload.
  wrong = dense.to_helper;
  *wrong.mutable_key_share() = keys.to_helper.key_share();
  EXPECT_THAT(helper_ep_.Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // The leader's dense share (D values) sent to the helper.
  wrong = dense.to_helper;
  *wrong.mutable_dense_share() = dense.to_leader.dense_share();
  EXPECT_THAT(helper_ep_.Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // A dense upload to the leader, then a PREAMBLE one under the same id to
  // the helper: the helper refuses it, the leader's half is never counted.
  TANDEM_ASSERT_OK(leader_ep_.Upload(dense.to_leader));
  wrong = keys.to_helper;
  wrong.set_task_id(params_.task_id());
  wrong.set_report_id(dense.to_helper.report_id());
  EXPECT_THAT(helper_ep_.Upload(wrong), StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing refused was stored, and an honest report still counts alone.
  TestReport honest = MakeDenseReport(params_, Values(3), 3).value();
  TANDEM_ASSERT_OK(UploadBoth(honest));
  auto a = leader_ep_.Finalize(params_.task_id(), 1);
  auto b = helper_ep_.Finalize(params_.task_id(), 1);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), 1u);
  EXPECT_EQ(b->accepted_reports(), 1u);
  EXPECT_EQ(SumShares(*a, *b).value(), honest.dense);
  auto s = helper_ep_.Status(params_.task_id());
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->pending_reports() + s->accepted_reports() + s->rejected_reports(), 1u);
}

}  // namespace
}  // namespace tandem
