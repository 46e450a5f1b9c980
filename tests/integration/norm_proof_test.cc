// Norm-bound proofs end to end: two real tandem-aggregator processes on
// loopback, a round with a norm bound, honest and malicious clients over
// gRPC. Honest reports are summed exactly; reports over the bound, with a
// flipped proof share or with a proof of other blocks are rejected by both
// daemons and never counted.
#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "aggregator/testing/report_factory.h"
#include "base/grpc_status.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::AddInto;
using aggregator::testing::MakeNormRoundParameters;
using aggregator::testing::MakeReportWithValues;
using aggregator::testing::SumShares;
using aggregator::testing::TestReport;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;

using Endpoint = ::tandem::testing::AggregatorEndpoint;

Endpoint Connect(int port) {
  return Endpoint::Connect(Loopback(port), grpc::InsecureChannelCredentials());
}

class NormProofDaemonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-norm");
    ASSERT_FALSE(dir_.empty());
    params_ = MakeNormRoundParameters("norm-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                      /*num_groups=*/4, /*block=*/400, /*total=*/1200);
    auto h = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, Args("helper"), dir_ + "/helper.log");
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    std::vector<std::string> leader_args = Args("leader");
    leader_args.push_back("--peer=" + Loopback(helper_->port()));
    auto l = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, leader_args, dir_ + "/leader.log");
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
    leader_ep_ = Connect(leader_->port());
    helper_ep_ = Connect(helper_->port());
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> Args(const std::string& role) {
    return tandem::testing::BareAggregatorArgs(role, dir_);
  }

  absl::Status Open(const Endpoint& ep) { return ep.Open(params_); }
  absl::Status Upload(const Endpoint& ep, const proto::UploadRequest& req) { return ep.Upload(req); }
  absl::StatusOr<proto::FinalizeResponse> Finalize(const Endpoint& ep) {
    return ep.Finalize(params_.task_id(), params_.round_id());
  }
  absl::StatusOr<proto::AggregatorStatusResponse> Status(const Endpoint& ep) {
    return ep.Status(params_.task_id());
  }

  std::vector<int64_t> Values(uint64_t seed, int magnitude) {
    auto rng = DeterministicRandom::FromSeed(seed);
    std::vector<int64_t> v(4 * 16);
    for (auto& x : v) {
      x = static_cast<int64_t>(rng->NextUint64().value() % (2 * magnitude + 1)) - magnitude;
    }
    return v;
  }

  std::string dir_;
  proto::RoundParameters params_;
  std::unique_ptr<DaemonProcess> leader_, helper_;
  Endpoint leader_ep_, helper_ep_;
};

TEST_F(NormProofDaemonsTest, HonestCountedMaliciousRejectedByBoth) {
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  std::vector<uint64_t> expected;
  int honest = 0, malicious = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    // |x| <= 4: block norm^2 <= 256 <= 400, total <= 1024 <= 1200.
    auto r = MakeReportWithValues(params_, Values(seed, 4), seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(Upload(leader_ep_, r->to_leader));
    TANDEM_ASSERT_OK(Upload(helper_ep_, r->to_helper));
    AddInto(expected, r->dense);
    ++honest;
  }
  std::vector<TestReport> bad;
  std::vector<int64_t> over = Values(20, 4);
  over[5] = 21;  // 441 > 400
  bad.push_back(MakeReportWithValues(params_, over, 21, /*cheat=*/true).value());
  std::vector<int64_t> huge = Values(22, 4);
  huge[40] = int64_t{1} << 33;
  bad.push_back(MakeReportWithValues(params_, huge, 23, /*cheat=*/true).value());
  TestReport flipped = MakeReportWithValues(params_, Values(24, 4), 24).value();
  auto* proof = flipped.to_leader.mutable_norm_proof();
  proof->set_proof(0, proof->proof(0) ^ 1);
  bad.push_back(flipped);
  TestReport mixed = MakeReportWithValues(params_, huge, 25, /*cheat=*/true).value();
  TestReport donor = MakeReportWithValues(params_, Values(26, 4), 26).value();
  *mixed.to_leader.mutable_norm_proof() = donor.to_leader.norm_proof();
  *mixed.to_helper.mutable_norm_proof() = donor.to_helper.norm_proof();
  bad.push_back(mixed);
  for (const TestReport& r : bad) {
    TANDEM_ASSERT_OK(Upload(leader_ep_, r.to_leader));
    TANDEM_ASSERT_OK(Upload(helper_ep_, r.to_helper));
    ++malicious;
  }
  // A replay of an honest upload is idempotent.
  auto again = MakeReportWithValues(params_, Values(1, 4), 1);
  TANDEM_ASSERT_OK(Upload(leader_ep_, again->to_leader));

  auto a = Finalize(leader_ep_);
  ASSERT_THAT(a, IsOk());
  auto b = Finalize(helper_ep_);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), static_cast<uint64_t>(honest));
  EXPECT_EQ(b->accepted_reports(), static_cast<uint64_t>(honest));
  auto sum = SumShares(*a, *b);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);
  for (const Endpoint* ep : {&leader_ep_, &helper_ep_}) {
    auto s = Status(*ep);
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->rejected_reports(), static_cast<uint64_t>(malicious));
    EXPECT_EQ(s->accepted_reports(), static_cast<uint64_t>(honest));
  }
}

}  // namespace
}  // namespace tandem
