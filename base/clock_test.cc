#include "base/clock.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(FakeClock, SleepAdvancesWithoutBlocking) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  clock.SleepFor(absl::Hours(3));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000 + 3 * 3600));
}

TEST(FakeClock, AdvanceIgnoresNegativeAndSetTimeJumps) {
  FakeClock clock(absl::FromUnixSeconds(50));
  clock.Advance(absl::Seconds(-10));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(50));
  clock.SetTime(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

TEST(RealClock, IsMonotoneAcrossShortSleep) {
  RealClock* clock = RealClock::Default();
  const absl::Time a = clock->Now();
  clock->SleepFor(absl::Milliseconds(2));
  EXPECT_GE(clock->Now() - a, absl::Milliseconds(1));
}

}  // namespace
}  // namespace tandem
