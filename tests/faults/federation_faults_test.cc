// Faults on the whole federation (issue 37), with the real coordinator, both
// aggregators and tandem-client processes (federation_faults_fixture.h):
//   - a leader that hangs (SIGSTOP) while the round collects;
//   - a coordinator that hangs while the round collects;
//   - every link slow and lossy at once (300 ms +- 50 ms each way, 3 % of
//     chunks held 200 ms more): clients to the coordinator and to both
//     aggregators, the coordinator to both collectors, the leader to the
//     helper.
// Invariants: every round is released once by each server, with the reports
// both counted; the federation goes on after the fault. Each prints what was
// injected and how long recovery took (bench/faults.md). Fixed seeds.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/fault_proxy.h"
#include "tests/faults/federation_faults_fixture.h"

namespace tandem::testing {
namespace {

using FederationHangTest = FederationFaultsTest;

TEST_F(FederationHangTest, AStoppedLeaderWhileTheRoundCollectsDelaysItOnly) {
  constexpr int kRounds = 2;
  const proto::CoordinatorStatusResponse collecting = StartAndWaitUntilCollecting(kRounds);
  ASSERT_FALSE(HasFailure());
  double slowest_status_s = 0, stopped_s = 0, recovered_s = 0;
  ASSERT_NO_FATAL_FAILURE(HangThenExpectReleases(
      pair_.leader->pid(), collecting, kRounds,
      [&] { slowest_status_s = PollStatusDuringFault(collecting.completed_rounds()); }, &stopped_s,
      &recovered_s));
  std::fprintf(stderr,
               "[fault] leader SIGSTOPped %.1f s while round %llu collected; slowest coordinator "
               "Status meanwhile %.3f s; released %.2f s after SIGCONT\n",
               stopped_s, static_cast<unsigned long long>(collecting.completed_rounds() + 1),
               slowest_status_s, recovered_s);
  EXPECT_LT(slowest_status_s, 5.0);
}

TEST_F(FederationHangTest, AStoppedCoordinatorWhileTheRoundCollectsDelaysItOnly) {
  constexpr int kRounds = 2;
  const proto::CoordinatorStatusResponse collecting = StartAndWaitUntilCollecting(kRounds);
  ASSERT_FALSE(HasFailure());
  double stopped_s = 0, recovered_s = 0;
  ASSERT_NO_FATAL_FAILURE(HangThenExpectReleases(
      coordinator_->pid(), collecting, kRounds,
      [&] {
        // The aggregators answer their collector meanwhile and release nothing.
        for (int i = 0; i < 6; ++i) {
          auto leader = LeaderStatus();
          EXPECT_TRUE(leader.ok()) << leader.status();
          if (leader.ok()) {
            EXPECT_EQ(leader->released_rounds(), collecting.completed_rounds());
          }
          absl::SleepFor(absl::Milliseconds(500));
        }
      },
      &stopped_s, &recovered_s));
  std::fprintf(stderr,
               "[fault] coordinator SIGSTOPped %.1f s while round %llu collected; released "
               "%.2f s after SIGCONT\n",
               stopped_s, static_cast<unsigned long long>(collecting.completed_rounds() + 1),
               recovered_s);
}

// Every link of the federation through its own FaultProxy.
class SlowNetworkTest : public FederationFaultsTest {
 protected:
  void CustomizePair(AggregatorPairOptions& o) override {
    o.leader_peer = [this](const std::string& helper_peer) { return Proxy(helper_peer); };
  }
  // A proxy in front of `target`, slow and lossy; its address.
  std::string Proxy(const std::string& target) {
    auto p = FaultProxy::Start(target, /*seed=*/100 + proxies_.size());
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return target;
    (*p)->SetDelay(absl::Milliseconds(300), absl::Milliseconds(50));
    (*p)->SetLoss(0.03, absl::Milliseconds(200));
    proxies_.push_back(*std::move(p));
    return proxies_.back()->address();
  }
  void TearDown() override {
    FederationFaultsTest::TearDown();
    proxies_.clear();
  }
  std::vector<std::unique_ptr<FaultProxy>> proxies_;
};

TEST_F(SlowNetworkTest, EveryLinkSlowAndLossyReleasesEveryRoundOnce) {
  constexpr int kRounds = 2;
  const std::string leader_uploads = Proxy(pair_.leader_address());
  const std::string helper_uploads = Proxy(pair_.helper_address());
  std::vector<std::string> args = CoordinatorArgs(RoundFlags(kRounds));
  for (std::string& a : args) {
    if (absl::StartsWith(a, "--leader=")) a = "--leader=" + Proxy(pair_.leader_collector_address());
    if (absl::StartsWith(a, "--helper=")) a = "--helper=" + Proxy(pair_.helper_collector_address());
    if (absl::StartsWith(a, "--announce_leader=")) a = "--announce_leader=" + leader_uploads;
    if (absl::StartsWith(a, "--announce_helper=")) a = "--announce_helper=" + helper_uploads;
  }
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(args));
  const std::string coordinator = Proxy(absl::StrCat("127.0.0.1:", port_));
  const absl::Time start = absl::Now();
  for (int shard = 0; shard < 2; ++shard) {
    ASSERT_NO_FATAL_FAILURE(
        StartClient(shard, 2, "",
                    {"--coordinator=" + coordinator, "--leader=" + leader_uploads,
                     "--helper=" + helper_uploads}));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRoundsReleasedOnce(kRounds));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  uint64_t forwarded = 0;
  for (const auto& p : proxies_) {
    EXPECT_GT(p->bytes_forwarded(), 0u) << p->address();  // every link carried the federation
    forwarded += p->bytes_forwarded();
  }
  std::fprintf(stderr,
               "[fault] all %zu links 300 ms +- 50 ms each way, 3 %% of chunks +200 ms: %d rounds "
               "released in %.1f s, %llu bytes through the proxies\n",
               proxies_.size(), kRounds, seconds, static_cast<unsigned long long>(forwarded));
}

}  // namespace
}  // namespace tandem::testing
