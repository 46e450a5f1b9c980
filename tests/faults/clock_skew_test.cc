// Clocks that disagree (issue 37), with the real federation: the daemons'
// wall clocks run minutes apart through Debian's libfaketime (LD_PRELOAD,
// CLOCK_MONOTONIC untouched; tests/testing/daemon_process.h SkewedClockEnv).
// Tickets expire, and rounds end, at a time set on the coordinator's clock
// and checked on the aggregators' (aggregator/core/aggregator.h
// max_clock_skew, default 5 minutes). Documented behaviour checked here:
//   - aggregators ahead of the coordinator within their tolerance (by more
//     than a round lasts): every round is released, each once, and the
//     coordinator reports the skew (Status, its log);
//   - the coordinator (and its clients) ahead of the aggregators: the same;
//   - an aggregator ahead by more than it tolerates: it refuses the uploads
//     as expired, nothing is released, and the coordinator's log says why.
// Each scenario also checks that the skew took effect (the aggregators' own
// Status says their time).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/federation_faults_fixture.h"

namespace tandem::testing {
namespace {

constexpr absl::Duration kLeaderAhead = absl::Minutes(4);
constexpr absl::Duration kHelperAhead = absl::Minutes(3);

bool HaveFaketime() { return !SkewedClockEnv(absl::Seconds(1)).empty(); }

// Rounds (RoundFlags) end 60 s after they open, less than the skews.

class ClockSkewTest : public FederationFaultsTest {
 protected:
  // The aggregator's clock minus ours, from its Status (ms).
  int64_t MeasuredOffsetMs(bool leader) {
    const absl::Time before = absl::Now();
    auto s = leader ? LeaderStatus() : HelperStatus();
    const absl::Time after = absl::Now();
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return 0;
    return s->now_unix_ms() - absl::ToUnixMillis(before + (after - before) / 2);
  }
  static void ExpectNear(int64_t offset_ms, absl::Duration expected) {
    EXPECT_LT(std::llabs(offset_ms - absl::ToInt64Milliseconds(expected)), 5000)
        << offset_ms << " ms, expected " << absl::FormatDuration(expected);
  }
};

class AggregatorsAheadTest : public ClockSkewTest {
 protected:
  void CustomizePair(AggregatorPairOptions& o) override {
    o.leader_env = SkewedClockEnv(kLeaderAhead);
    o.helper_env = SkewedClockEnv(kHelperAhead);
  }
};

TEST_F(AggregatorsAheadTest, WithinTheirToleranceEveryRoundIsReleasedAndTheSkewReported) {
  if (!HaveFaketime()) GTEST_SKIP() << "libfaketime is not installed";
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(RoundFlags(2)));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectRoundsReleasedOnce(2));
  // The skew took effect: the aggregators' own Status says their time.
  ExpectNear(MeasuredOffsetMs(/*leader=*/true), kLeaderAhead);
  ExpectNear(MeasuredOffsetMs(/*leader=*/false), kHelperAhead);
  absl::StatusOr<proto::CoordinatorStatusResponse> s = Status();
  ASSERT_TRUE(s.ok()) << s.status();
  ExpectNear(s->aggregator_clock_offset_ms().at("leader"), kLeaderAhead);
  ExpectNear(s->aggregator_clock_offset_ms().at("helper"), kHelperAhead);
  const std::string log = ReadAll(dir_ + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "the leader's clock is 4m")) << log;
  EXPECT_TRUE(absl::StrContains(log, "the helper's clock is 3m")) << log;
  EXPECT_TRUE(absl::StrContains(log, "more than half of it")) << log;
  std::fprintf(stderr,
               "[fault] aggregators' clocks +%lld / +%lld ms of the coordinator's (60 s rounds, "
               "5 min tolerated): 2 rounds released, each once\n",
               static_cast<long long>(s->aggregator_clock_offset_ms().at("leader")),
               static_cast<long long>(s->aggregator_clock_offset_ms().at("helper")));
}

class AggregatorBeyondToleranceTest : public ClockSkewTest {
 protected:
  void CustomizePair(AggregatorPairOptions& o) override {
    o.leader_env = SkewedClockEnv(kLeaderAhead);
    o.extra_args = {"--max_clock_skew_s=60"};
  }
};

TEST_F(AggregatorBeyondToleranceTest, RefusesUploadsAsExpiredAndTheCoordinatorSaysWhy) {
  if (!HaveFaketime()) GTEST_SKIP() << "libfaketime is not installed";
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(RoundFlags(1, /*timeout_s=*/8)));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));
  // The round opens (the leader says its time), its uploads are refused
  // (the clients are told why), and it closes at its deadline without a
  // release; on a loaded machine the clients may reach only a later round.
  const std::string why = "it refuses uploads as expired before their deadline";
  const absl::Time end = absl::Now() + absl::Seconds(90);
  std::string log, client_log;
  while (absl::Now() < end) {
    log = ReadAll(dir_ + "/coordinator.log");
    client_log = ReadAll(dir_ + "/client0.log") + ReadAll(dir_ + "/client1.log");
    if (absl::StrContains(log, why) && absl::StrContains(log, "abandon") &&
        absl::StrContains(client_log, "tolerated clock skew")) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(absl::StrContains(log, why)) << log;
  EXPECT_TRUE(absl::StrContains(log, "abandon")) << log;
  absl::StatusOr<proto::CoordinatorStatusResponse> s = Status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->completed_rounds(), 0u);
  auto leader = LeaderStatus();
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->released_rounds(), 0u);
  EXPECT_EQ(leader->max_clock_skew_ms(), 60000);
  ExpectNear(MeasuredOffsetMs(/*leader=*/true), kLeaderAhead);
  // What the clients were told.
  EXPECT_TRUE(absl::StrContains(client_log, "tolerated clock skew")) << client_log;
}

class CoordinatorAheadTest : public ClockSkewTest {};

TEST_F(CoordinatorAheadTest, TheAggregatorsBehindReleaseEveryRoundAndTheSkewIsReported) {
  if (!HaveFaketime()) GTEST_SKIP() << "libfaketime is not installed";
  // The coordinator and its devices share a clock 4 minutes ahead of the
  // aggregators' (device check-ins are checked against the coordinator's
  // clock within --checkin_max_skew_s).
  coordinator_env_ = SkewedClockEnv(kLeaderAhead);
  client_env_ = coordinator_env_;
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(RoundFlags(2)));
  ASSERT_NO_FATAL_FAILURE(StartClient(0, 2));
  ASSERT_NO_FATAL_FAILURE(StartClient(1, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectRoundsReleasedOnce(2));
  absl::StatusOr<proto::CoordinatorStatusResponse> s = Status();
  ASSERT_TRUE(s.ok()) << s.status();
  ExpectNear(s->aggregator_clock_offset_ms().at("leader"), -kLeaderAhead);
  ExpectNear(s->aggregator_clock_offset_ms().at("helper"), -kLeaderAhead);
  const std::string log = ReadAll(dir_ + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "the leader's clock is 4m")) << log;
  EXPECT_TRUE(absl::StrContains(log, "behind this coordinator's")) << log;
}

}  // namespace
}  // namespace tandem::testing
