// Faults on the coordinator's links (issue 37): the real tandem-coordinator,
// both aggregators and tandem-client processes on loopback, TLS, tickets,
// norm proofs (tests/integration/federation_fixture.h), with the
// coordinator -> leader collector link through a FaultProxy. The link is cut
// while the coordinator finalizes a round, then healed. Invariants: the
// round is released once (each aggregator releases every round exactly
// once: one noise draw per round per server), both servers count the same
// reports, nothing is released while the link is cut, and the federation
// goes on to release every next round.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/fault_proxy.h"
#include "tests/faults/federation_faults_fixture.h"

namespace tandem::testing {
namespace {

using CoordinatorLinkFaultsTest = FederationFaultsTest;

TEST_F(CoordinatorLinkFaultsTest, APartitionDuringFinalizeReleasesTheRoundOnceAfterHealing) {
  constexpr int kRounds = 3;
  auto proxy = FaultProxy::Start(pair_.leader_collector_address(), 37);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  std::vector<std::string> args =
      CoordinatorArgs({absl::StrCat("--rounds=", kRounds), "--target_reports=2", "--min_reports=2",
                       "--round_timeout_s=30"});
  for (std::string& a : args) {
    if (absl::StartsWith(a, "--leader=")) a = "--leader=" + (*proxy)->address();
  }
  // A slow link (300 ms each way) keeps every collector call in flight long
  // enough to cut it mid-call.
  (*proxy)->SetDelay(absl::Milliseconds(300), absl::ZeroDuration());
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(args));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));

  const proto::CoordinatorStatusResponse finalizing = WaitForPhase("finalizing");
  ASSERT_EQ(finalizing.phase(), "finalizing");
  (*proxy)->Cut();
  const absl::Time cut = absl::Now();
  absl::SleepFor(absl::Seconds(2));
  absl::StatusOr<proto::CoordinatorStatusResponse> during = Status();
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->completed_rounds(), finalizing.completed_rounds())
      << "a round was released across the cut link";
  (*proxy)->Heal();
  (*proxy)->SetDelay(absl::ZeroDuration(), absl::ZeroDuration());
  const absl::Time healed = absl::Now();
  absl::Time recovered;
  ASSERT_NO_FATAL_FAILURE(ExpectEveryRoundReleasedOnce(finalizing, kRounds, &recovered));
  std::fprintf(stderr,
               "[fault] coordinator-leader link cut %.1f s during Finalize of round %llu; "
               "released %.2f s after healing; %d rounds released\n",
               absl::ToDoubleSeconds(healed - cut),
               static_cast<unsigned long long>(finalizing.completed_rounds() + 1),
               absl::ToDoubleSeconds(recovered - healed), kRounds);
  // The coordinator's Finalize failed across the cut and was retried.
  const std::string log = ReadAll(dir_ + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "(will retry)")) << log;
}

// The helper hangs (SIGSTOP) while the coordinator finalizes: the leader's
// last verification pass waits on it, the coordinator keeps answering its
// operators, and the round is released once the helper resumes.
TEST_F(CoordinatorLinkFaultsTest, AStoppedHelperDuringFinalizeDelaysTheReleaseOnly) {
  constexpr int kRounds = 2;
  // The coordinator's link to the helper's collector is slow (300 ms each
  // way), so that its Finalize lasts long enough to be caught in the act.
  auto proxy = FaultProxy::Start(pair_.helper_collector_address(), 38);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  (*proxy)->SetDelay(absl::Milliseconds(300), absl::ZeroDuration());
  std::vector<std::string> args =
      CoordinatorArgs({absl::StrCat("--rounds=", kRounds), "--target_reports=2", "--min_reports=2",
                       "--round_timeout_s=30"});
  for (std::string& a : args) {
    if (absl::StartsWith(a, "--helper=")) a = "--helper=" + (*proxy)->address();
  }
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(args));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));
  const proto::CoordinatorStatusResponse finalizing = WaitForPhase("finalizing");
  ASSERT_EQ(finalizing.phase(), "finalizing");
  // The operator's view answers while the helper is stopped.
  double slowest_status_s = 0, stopped_s = 0, recovered_s = 0;
  ASSERT_NO_FATAL_FAILURE(HangThenExpectReleases(
      pair_.helper->pid(), finalizing, kRounds,
      [&] { slowest_status_s = PollStatusDuringFault(finalizing.completed_rounds()); }, &stopped_s,
      &recovered_s));
  std::fprintf(stderr,
               "[fault] helper SIGSTOPped %.1f s during Finalize; slowest coordinator Status "
               "meanwhile %.3f s; released %.2f s after SIGCONT\n",
               stopped_s, slowest_status_s, recovered_s);
  EXPECT_LT(slowest_status_s, 5.0);
}

}  // namespace
}  // namespace tandem::testing
