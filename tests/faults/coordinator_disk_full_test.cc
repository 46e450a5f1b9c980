// A full disk under the coordinator's state (issue 37): the real federation
// (federation_faults_fixture.h) with the coordinator's state directory on a
// tmpfs of a few MiB that the test fills. A coordinator that cannot record a
// round's release does not publish it: it keeps answering its operators,
// says why in its log, goes back to its stored state and finalizes the
// round again until the record succeeds (no second noise draw at the
// aggregators); once space returns the federation goes on, every round is
// released once by each server, and a restarted coordinator has every one
// in its history.
// Needs root for the tmpfs mount (skipped otherwise).
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/federation_faults_fixture.h"

namespace tandem::testing {
namespace {

class CoordinatorDiskFullTest : public FederationFaultsTest {
 protected:
  void SetUp() override {
    FederationFaultsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    mount_ = dir_ + "/coordinator";
    std::filesystem::create_directories(mount_);
    if (geteuid() != 0 || mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=8m") != 0) {
      GTEST_SKIP() << "needs root to mount a tmpfs under the coordinator's state";
    }
    mounted_ = true;
  }
  void TearDown() override {
    clients_.clear();
    coordinator_.reset();
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
    FederationFaultsTest::TearDown();
  }
  // Fills the tmpfs until a write fails.
  void Fill() {
    std::ofstream filler(mount_ + "/filler", std::ios::binary);
    const std::string block(64 * 1024, 'x');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }

  std::string mount_;
  bool mounted_ = false;
};

// The disk fills after both uploads of round 1 and before the round's
// deadline: the aggregators release it, recording the release fails, and
// the coordinator goes back to its stored state and finalizes the round again
// (the aggregators answer with the same released share) once space returns.
TEST_F(CoordinatorDiskFullTest, AReleaseThatCannotBeRecordedIsRecordedOnceSpaceReturns) {
  constexpr int kRounds = 2;
  // Two clients and a target of 3: each round waits for its 12 s deadline
  // (time for both uploads and for the disk to fill before it, also on a
  // loaded machine).
  const std::vector<std::string> args =
      CoordinatorArgs({absl::StrCat("--rounds=", kRounds), "--target_reports=3", "--min_reports=2",
                       "--round_timeout_s=12"});
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(args));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));
  const proto::CoordinatorStatusResponse uploaded = WaitFor(
      [](const proto::CoordinatorStatusResponse& s) {
        return s.phase() == "collecting" && s.uploads_done() == 2;
      },
      absl::Seconds(60));
  ASSERT_EQ(uploaded.uploads_done(), 2u);
  // Round 1, or round 2 where a loaded machine let round 1 pass unseen.
  const uint64_t before = uploaded.completed_rounds();
  ASSERT_LT(before, static_cast<uint64_t>(kRounds));
  Fill();
  const absl::Time filled = absl::Now();
  // At the deadline the aggregators release the round; its record fails.
  std::string log;
  const absl::Time end = absl::Now() + absl::Seconds(30);
  while (absl::Now() < end && !absl::StrContains(log, "recording it failed")) {
    absl::SleepFor(absl::Milliseconds(200));
    log = ReadAll(dir_ + "/coordinator.log");
  }
  ASSERT_TRUE(absl::StrContains(log, "recording it failed")) << log;
  absl::SleepFor(absl::Seconds(2));  // a retry fails too
  absl::StatusOr<proto::CoordinatorStatusResponse> during = Status();
  ASSERT_TRUE(during.ok()) << during.status();  // it answers its operators
  EXPECT_EQ(during->completed_rounds(), before);
  auto leader = LeaderStatus();
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->released_rounds(), before + 1);
  std::filesystem::remove(mount_ + "/filler");
  const absl::Time freed = absl::Now();
  const proto::CoordinatorStatusResponse recorded = WaitFor(
      [&](const proto::CoordinatorStatusResponse& s) { return s.completed_rounds() > before; },
      absl::Seconds(60));
  const absl::Time recovered = absl::Now();
  ASSERT_GT(recorded.completed_rounds(), before);
  leader = LeaderStatus();
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_LE(leader->released_rounds(), before + 2);  // that round once (the next may follow)
  ASSERT_NO_FATAL_FAILURE(ExpectRoundsReleasedOnce(kRounds));
  log = ReadAll(dir_ + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "store writes stalled: RESOURCE_EXHAUSTED")) << log;
  EXPECT_TRUE(absl::StrContains(log, "store writes resumed after")) << log;
  // A restarted coordinator has every round (nothing acknowledged was lost).
  coordinator_->Kill();
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(args));
  const proto::CoordinatorStatusResponse restarted =
      WaitFor([](const proto::CoordinatorStatusResponse& s) { return s.history_size() > 0; },
              absl::Seconds(30));
  EXPECT_EQ(restarted.completed_rounds(), static_cast<uint64_t>(kRounds));
  EXPECT_EQ(restarted.history_size(), kRounds);
  int failures = 0;
  for (size_t at = log.find("recording it failed"); at != std::string::npos;
       at = log.find("recording it failed", at + 1)) {
    ++failures;
  }
  std::fprintf(
      stderr,
      "[fault] coordinator's state disk full for %.1f s across round %llu's release (8 MiB "
      "tmpfs): %d failed records, the aggregators released it once; recorded %.2f s "
      "after space returned; %d rounds, each released once\n",
      absl::ToDoubleSeconds(freed - filled), static_cast<unsigned long long>(before + 1), failures,
      absl::ToDoubleSeconds(recovered - freed), kRounds);
}

}  // namespace
}  // namespace tandem::testing
