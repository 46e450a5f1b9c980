// The fixture of the fault scenarios with a whole federation (fault harness,
// tests/faults): the real tandem-coordinator, both aggregators and
// tandem-client processes on loopback, TLS, tickets and norm proofs
// (tests/integration/federation_fixture.h), and the checks every scenario
// ends with. Test-only; not thread-safe.
#ifndef TANDEM_TESTS_FAULTS_FEDERATION_FAULTS_FIXTURE_H_
#define TANDEM_TESTS_FAULTS_FEDERATION_FAULTS_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/integration/federation_fixture.h"

namespace tandem::testing {

class FederationFaultsTest : public FederationFixture {
 protected:
  // The collector's view as the coordinator has it (its identity; the
  // aggregator's TLS name), of task "default".
  absl::StatusOr<proto::AggregatorStatusResponse> AggregatorStatus(const std::string& address,
                                                                   const std::string& name) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadAll(dir_ + "/ca.pem");
    o.pem_cert_chain = ReadAll(dir_ + "/coordinator.pem");
    o.pem_private_key = ReadAll(dir_ + "/coordinator.key");
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(name);
    auto stub = proto::AggregatorCollector::NewStub(
        grpc::CreateCustomChannel(address, grpc::SslCredentials(o), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    proto::AggregatorStatusRequest req;
    req.set_task_id("default");
    proto::AggregatorStatusResponse out;
    grpc::Status s = stub->Status(&ctx, req, &out);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return out;
  }
  absl::StatusOr<proto::AggregatorStatusResponse> LeaderStatus() {
    return AggregatorStatus(pair_.leader_collector_address(), "leader.tandem");
  }
  absl::StatusOr<proto::AggregatorStatusResponse> HelperStatus() {
    return AggregatorStatus(pair_.helper_collector_address(), "helper.tandem");
  }

  // Waits for `rounds` released rounds (up to `timeout`) and checks the
  // invariants: the coordinator's history has each once with
  // `reports_per_round` reports both servers counted, and each server
  // released every round exactly once (one noise draw each).
  void ExpectRoundsReleasedOnce(int rounds, int reports_per_round = 2,
                                absl::Duration timeout = absl::Seconds(180)) {
    const proto::CoordinatorStatusResponse done = WaitFor(
        [&](const proto::CoordinatorStatusResponse& s) {
          return s.completed_rounds() >= static_cast<uint64_t>(rounds);
        },
        timeout);
    ASSERT_EQ(done.completed_rounds(), static_cast<uint64_t>(rounds));
    ASSERT_EQ(done.history_size(), rounds);
    for (const proto::RoundSummary& r : done.history()) {
      EXPECT_EQ(r.accepted_reports(), static_cast<uint64_t>(reports_per_round))
          << r.model_version();
    }
    auto leader = LeaderStatus();
    auto helper = HelperStatus();
    ASSERT_TRUE(leader.ok()) << leader.status();
    ASSERT_TRUE(helper.ok()) << helper.status();
    EXPECT_EQ(leader->released_rounds(), static_cast<uint64_t>(rounds));
    EXPECT_EQ(helper->released_rounds(), static_cast<uint64_t>(rounds));
  }

  // After a fault injected while round `faulted.completed_rounds() + 1` was
  // open: waits for that round's release (its time in *recovered), then for
  // all `rounds` (ExpectRoundsReleasedOnce).
  void ExpectEveryRoundReleasedOnce(const proto::CoordinatorStatusResponse& faulted, int rounds,
                                    absl::Time* recovered) {
    const proto::CoordinatorStatusResponse next = WaitFor(
        [&](const proto::CoordinatorStatusResponse& s) {
          return s.completed_rounds() > faulted.completed_rounds();
        },
        absl::Seconds(90));
    *recovered = absl::Now();
    ASSERT_GT(next.completed_rounds(), faulted.completed_rounds());
    ExpectRoundsReleasedOnce(rounds);
  }

  // A hang: SIGSTOPs `pid`, runs `meanwhile`, SIGCONTs it; then waits for
  // the round `faulted` was in to be released and checks every round
  // (ExpectEveryRoundReleasedOnce). How long it was stopped, and how long
  // from SIGCONT to that release, in *stopped_s and *recovered_s.
  void HangThenExpectReleases(pid_t pid, const proto::CoordinatorStatusResponse& faulted,
                              int rounds, const std::function<void()>& meanwhile, double* stopped_s,
                              double* recovered_s) {
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
    const absl::Time stopped = absl::Now();
    meanwhile();
    ASSERT_EQ(kill(pid, SIGCONT), 0);
    const absl::Time resumed = absl::Now();
    *stopped_s = absl::ToDoubleSeconds(resumed - stopped);
    absl::Time recovered;
    ASSERT_NO_FATAL_FAILURE(ExpectEveryRoundReleasedOnce(faulted, rounds, &recovered));
    *recovered_s = absl::ToDoubleSeconds(recovered - resumed);
  }

  // Waits for the coordinator's phase to be `phase` (up to 2 minutes).
  proto::CoordinatorStatusResponse WaitForPhase(const std::string& phase) {
    return WaitFor([&](const proto::CoordinatorStatusResponse& s) { return s.phase() == phase; },
                   absl::Seconds(120));
  }

  // The coordinator's flags for `rounds` rounds of 2 reports, `timeout_s`
  // each at most.
  static std::vector<std::string> RoundFlags(int rounds, int timeout_s = 60) {
    return {absl::StrCat("--rounds=", rounds), "--target_reports=2", "--min_reports=2",
            absl::StrCat("--round_timeout_s=", timeout_s)};
  }

  // The coordinator with the test task for RoundFlags(rounds), two clients,
  // and the status once the first round collects.
  proto::CoordinatorStatusResponse StartAndWaitUntilCollecting(int rounds) {
    StartCoordinator(RoundFlags(rounds));
    StartClient(0, 2);
    StartClient(1, 2);
    const proto::CoordinatorStatusResponse s = WaitForPhase("collecting");
    EXPECT_EQ(s.phase(), "collecting");
    return s;
  }

  // While a fault lasts: polls the coordinator's Status `n` times, 300 ms
  // apart; each must answer with no round released past `completed`.
  // Returns the slowest answer's seconds.
  double PollStatusDuringFault(uint64_t completed, int n = 10) {
    double slowest_s = 0;
    for (int i = 0; i < n; ++i) {
      const absl::Time t = absl::Now();
      absl::StatusOr<proto::CoordinatorStatusResponse> s = Status();
      slowest_s = std::max(slowest_s, absl::ToDoubleSeconds(absl::Now() - t));
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) {
        EXPECT_EQ(s->completed_rounds(), completed);
      }
      absl::SleepFor(absl::Milliseconds(300));
    }
    return slowest_s;
  }
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FAULTS_FEDERATION_FAULTS_FIXTURE_H_
