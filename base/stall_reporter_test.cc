#include "base/stall_reporter.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(StallReporterTest, ARunOfFailuresIsAFewLinesWithTheReason) {
  StallReporter r("verification", "passes", "pending reports wait and the pass is retried");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(r.Observe(absl::OkStatus(), t0).has_value());  // healthy: silent
  EXPECT_EQ(r.stalled_seconds(t0), 0.0);
  auto first = r.Observe(absl::UnavailableError("helper unreachable"), t0);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->warning);
  EXPECT_THAT(first->text, HasSubstr("verification stalled: UNAVAILABLE: helper unreachable"));
  // Passes every 100 ms for 29.9 s: no more lines.
  for (int i = 1; i < 300; ++i) {
    EXPECT_FALSE(
        r.Observe(absl::UnavailableError("helper unreachable"), t0 + absl::Milliseconds(100 * i))
            .has_value())
        << i;
  }
  auto again = r.Observe(absl::DeadlineExceededError("Verify"), t0 + absl::Seconds(30));
  ASSERT_TRUE(again.has_value());
  EXPECT_THAT(again->text, HasSubstr("still stalled after 30.0 s (301 failed passes)"));
  EXPECT_THAT(again->text, HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_DOUBLE_EQ(r.stalled_seconds(t0 + absl::Seconds(31)), 31.0);
  EXPECT_THAT(r.last_error(), HasSubstr("DEADLINE_EXCEEDED"));
  auto resumed = r.Observe(absl::OkStatus(), t0 + absl::Seconds(32));
  ASSERT_TRUE(resumed.has_value());
  EXPECT_FALSE(resumed->warning);
  EXPECT_THAT(resumed->text, HasSubstr("resumed after 32.0 s (301 failed passes"));
  EXPECT_EQ(r.stalled_seconds(t0 + absl::Seconds(33)), 0.0);
  EXPECT_EQ(r.last_error(), "");
  // A new stall starts its own count.
  auto next = r.Observe(absl::InternalError("disk"), t0 + absl::Seconds(40));
  ASSERT_TRUE(next.has_value());
  EXPECT_THAT(next->text, HasSubstr("verification stalled: INTERNAL: disk"));
}

TEST(StallReporterTest, LinesNameTheSubjectAndItsAttempts) {
  StallReporter r("store writes", "writes", "check-ins are refused", absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(50);
  auto first = r.Observe(absl::ResourceExhaustedError("disk full"), t0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->text,
            "store writes stalled: RESOURCE_EXHAUSTED: disk full; check-ins are refused");
  auto again = r.Observe(absl::ResourceExhaustedError("disk full"), t0 + absl::Seconds(10));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(
      again->text,
      "store writes still stalled after 10.0 s (2 failed writes): RESOURCE_EXHAUSTED: disk full");
  auto back = r.Observe(absl::OkStatus(), t0 + absl::Seconds(12));
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->warning);
  EXPECT_EQ(back->text,
            "store writes resumed after 12.0 s (2 failed writes; last error: RESOURCE_EXHAUSTED: "
            "disk full)");
}

}  // namespace
}  // namespace tandem
