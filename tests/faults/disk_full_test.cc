// A full disk under the leader's state (fault harness, tests/faults): the
// leader's state directory is a tmpfs of a few MiB that the test fills.
// Uploads are then refused with RESOURCE_EXHAUSTED or UNAVAILABLE (a client
// retries those), nothing is acknowledged that is not durable, and once
// space returns the refused reports are accepted on retry and the release
// equals the plain sum of every acknowledged report, each counted once,
// also after a SIGKILL. Needs root for the tmpfs mount (skipped otherwise).
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "aggregator/testing/report_factory.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::AddInto;
using aggregator::testing::MakeReport;
using aggregator::testing::MakeRoundParameters;
using aggregator::testing::SumShares;
using aggregator::testing::TestReport;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;

using Endpoint = tandem::testing::AggregatorEndpoint;

// Param: the leader keeps its shares in segment files (--segment_share_files)
// instead of SQLite rows.
class DiskFullTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-disk-full");
    ASSERT_FALSE(dir_.empty());
    mount_ = dir_ + "/leader";
    std::filesystem::create_directories(mount_);
    if (geteuid() != 0 || mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=4m") != 0) {
      GTEST_SKIP() << "needs root to mount a tmpfs under the leader's state";
    }
    mounted_ = true;
    params_ = MakeRoundParameters("disk-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                  /*num_groups=*/4);
    auto h = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN,
                                  tandem::testing::BareAggregatorArgs("helper", dir_),
                                  dir_ + "/helper.log");
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    StartLeader();
    helper_ep_ = Endpoint::Connect(Loopback(helper_->port()), grpc::InsecureChannelCredentials());
    TANDEM_ASSERT_OK(leader_ep_.Open(params_));
    TANDEM_ASSERT_OK(helper_ep_.Open(params_));
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir_);
  }

  void StartLeader() {
    leader_.reset();
    std::vector<std::string> args = tandem::testing::BareAggregatorArgs("leader", dir_);
    args.push_back("--peer=" + Loopback(helper_->port()));
    if (GetParam()) args.push_back("--segment_share_files");
    auto l = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, args, dir_ + "/leader.log");
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
    leader_ep_ = Endpoint::Connect(Loopback(leader_->port()), grpc::InsecureChannelCredentials());
  }

  // Fills the tmpfs until a write fails, less `keep` bytes.
  void Fill(size_t keep) {
    std::ofstream filler(mount_ + "/filler", std::ios::binary);
    const std::string block(4096, 'f');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
    filler.close();
    const auto size = std::filesystem::file_size(mount_ + "/filler");
    std::filesystem::resize_file(mount_ + "/filler", size > keep ? size - keep : 0);
  }

  uint64_t Accepted() {
    auto s = leader_ep_.Status(params_.task_id());
    return s.ok() ? s->accepted_reports() : 0;
  }

  std::string dir_, mount_;
  bool mounted_ = false;
  proto::RoundParameters params_;
  std::unique_ptr<DaemonProcess> leader_, helper_;
  Endpoint leader_ep_, helper_ep_;
};

TEST_P(DiskFullTest, UploadsAreRefusedRetryableAndNothingAcknowledgedIsLost) {
  std::vector<uint64_t> expected;
  std::vector<TestReport> refused;
  int acknowledged = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {  // room to spare
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(leader_ep_.Upload(r->to_leader));
    TANDEM_ASSERT_OK(helper_ep_.Upload(r->to_helper));
    AddInto(expected, r->dense);
    ++acknowledged;
  }
  Fill(/*keep=*/16 * 1024);
  int refusals = 0;
  std::string first_refusal;
  for (uint64_t seed = 5; seed <= 60; ++seed) {
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(helper_ep_.Upload(r->to_helper));
    const absl::Status s = leader_ep_.Upload(r->to_leader);
    if (s.ok()) {
      AddInto(expected, r->dense);
      ++acknowledged;
      continue;
    }
    if (refusals++ == 0) first_refusal = s.ToString();
    EXPECT_TRUE(absl::IsResourceExhausted(s) || absl::IsUnavailable(s))
        << "a full disk must look retryable to the client, got " << s;
    refused.push_back(*std::move(r));
  }
  std::printf(
      "[fault] leader disk full (4 MiB tmpfs, 16 KiB left, %s): %d of 56 uploads "
      "refused (first: %s), %d acknowledged\n",
      GetParam() ? "segment files" : "SQLite rows", refusals, first_refusal.c_str(), acknowledged);
  ASSERT_GT(refusals, 0) << "the disk never filled";
  // Space returns; the client's retries of the refused reports succeed.
  std::filesystem::remove(mount_ + "/filler");
  for (const TestReport& r : refused) {
    TANDEM_ASSERT_OK(leader_ep_.Upload(r.to_leader));
    AddInto(expected, r.dense);
    ++acknowledged;
  }
  // And a SIGKILL after the fault loses none of it.
  leader_->Kill();
  StartLeader();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (Accepted() < static_cast<uint64_t>(acknowledged) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto a = leader_ep_.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(a, IsOk());
  auto b = helper_ep_.Finalize(params_.task_id(), params_.round_id());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), static_cast<uint64_t>(acknowledged));
  EXPECT_EQ(b->accepted_reports(), static_cast<uint64_t>(acknowledged));
  auto sum = SumShares(*a, *b);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, expected);
}

INSTANTIATE_TEST_SUITE_P(Stores, DiskFullTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SegmentFiles" : "Sqlite";
                         });

}  // namespace
}  // namespace tandem
