#include "server/core/clock_skew.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

class Lines : public LogSink {
 public:
  void Send(LogSeverity, absl::string_view, int, absl::string_view message) override {
    absl::MutexLock lock(&mu_);
    lines_.emplace_back(message);
  }
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(lines_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_;
};

class ClockSkewMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = SetLogSink(&lines_); }
  void TearDown() override { SetLogSink(previous_); }

  // The aggregator answers at `aggregator_time` (ms) after a call of
  // `round_trip` on this clock; returns when the call started.
  void Read(const std::string& role, int64_t aggregator_offset_ms, absl::Duration round_trip,
            int64_t tolerance_ms = 300000) {
    const absl::Time sent = clock_.Now();
    clock_.Advance(round_trip);
    proto::OpenRoundResponse r;
    r.set_now_unix_ms(absl::ToUnixMillis(sent + round_trip / 2) + aggregator_offset_ms);
    r.set_max_clock_skew_ms(tolerance_ms);
    monitor_.Observe(role, sent, clock_.Now(), r);
  }

  FakeClock clock_;
  ClockSkewMonitor monitor_{&clock_};
  Lines lines_;
  LogSink* previous_ = nullptr;
};

TEST_F(ClockSkewMonitorTest, OffsetIsAgainstTheMidpointOfTheCall) {
  Read("leader", 1234, absl::Milliseconds(400));
  Read("helper", -56, absl::Milliseconds(10));
  EXPECT_THAT(monitor_.OffsetsMs(), ElementsAre(Pair("helper", -56), Pair("leader", 1234)));
  EXPECT_THAT(lines_.Take(), IsEmpty());     // well within half of 300 s
  Read("leader", 7, absl::Milliseconds(2));  // the last reading is kept
  EXPECT_EQ(monitor_.OffsetsMs().at("leader"), 7);
}

TEST_F(ClockSkewMonitorTest, AnAggregatorThatDoesNotSayItsTimeIsNotMeasured) {
  monitor_.Observe("leader", clock_.Now(), clock_.Now(), proto::OpenRoundResponse());
  proto::OpenRoundResponse r;
  r.set_now_unix_ms(absl::ToUnixMillis(clock_.Now()));
  // An answer "before" the call (a clock stepped back meanwhile) says nothing.
  monitor_.Observe("leader", clock_.Now(), clock_.Now() - absl::Seconds(1), r);
  EXPECT_THAT(monitor_.OffsetsMs(), IsEmpty());
}

TEST_F(ClockSkewMonitorTest, LogsOnlyWhenAnAggregatorCrossesHalfOrAllOfItsTolerance) {
  Read("leader", 200 * 1000, absl::Milliseconds(4));  // over half of 300 s
  std::vector<std::string> lines = lines_.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("leader's clock is 3m20s ahead of this coordinator's"));
  EXPECT_THAT(lines[0], HasSubstr("more than half"));
  Read("leader", 201 * 1000, absl::Milliseconds(4));  // same state: silent
  EXPECT_THAT(lines_.Take(), IsEmpty());
  Read("leader", 400 * 1000, absl::Milliseconds(4));
  lines = lines_.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("refuses uploads as expired"));
  Read("helper", -400 * 1000, absl::Milliseconds(4));
  lines = lines_.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("helper's clock is 6m40s behind"));
  EXPECT_THAT(lines[0], HasSubstr("accepts uploads after their deadline"));
  Read("leader", 1000, absl::Milliseconds(4));
  lines = lines_.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("back within half"));
  // No tolerance at all: any measurable offset is beyond it.
  Read("helper", 0, absl::Milliseconds(4), /*tolerance_ms=*/0);
  EXPECT_THAT(lines_.Take(), ElementsAre(HasSubstr("back within half")));
  Read("helper", 5, absl::Milliseconds(4), /*tolerance_ms=*/0);
  EXPECT_THAT(lines_.Take(), ElementsAre(HasSubstr("refuses uploads as expired")));
}

}  // namespace
}  // namespace tandem::server
