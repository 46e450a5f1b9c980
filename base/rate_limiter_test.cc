#include "base/rate_limiter.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(RateLimiterTest, BurstThenRatePerKey) {
  FakeClock clock;
  RateLimiter limiter(/*rate=*/2, /*burst=*/3, /*max_keys=*/100, &clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Allow("a")) << i;
  EXPECT_FALSE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("b"));  // keys are independent
  clock.Advance(absl::Milliseconds(499));
  EXPECT_FALSE(limiter.Allow("a"));  // 0.998 tokens
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_FALSE(limiter.Allow("a"));
  clock.Advance(absl::Seconds(60));  // refills to the burst, not beyond
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Allow("a")) << i;
  EXPECT_FALSE(limiter.Allow("a"));
}

TEST(RateLimiterTest, BoundedKeysForgetIdleOnesAndRefuseWhenAllAreBusy) {
  FakeClock clock;
  RateLimiter limiter(1, 1, /*max_keys=*/4, &clock);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.Allow(absl::StrCat("k", i)));
  EXPECT_FALSE(limiter.Allow("k4"));  // table full of busy keys: fail closed
  EXPECT_EQ(limiter.keys(), 4u);
  clock.Advance(absl::Seconds(1));  // all refilled: idle, forgettable
  EXPECT_TRUE(limiter.Allow("k4"));
  EXPECT_EQ(limiter.keys(), 1u);
}

TEST(RateLimiterTest, DisabledAllowsEverything) {
  FakeClock clock;
  RateLimiter limiter(0, 1, 1, &clock);
  EXPECT_FALSE(limiter.enabled());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(limiter.Allow(absl::StrCat(i)));
}

}  // namespace
}  // namespace tandem
