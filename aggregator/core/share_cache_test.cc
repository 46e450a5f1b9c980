#include "aggregator/core/share_cache.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

std::shared_ptr<const ParsedShare> Share(const std::string& ticket) {
  auto s = std::make_shared<ParsedShare>();
  s->ticket_digest = ticket;
  return s;
}

TEST(PendingShareCacheTest, GetReturnsWhatWasPutForThatRoundOnly) {
  PendingShareCache cache(1000);
  ASSERT_TRUE(cache.Put(3, "a", Share("x"), 10));
  auto got = cache.Get(3, "a");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->ticket_digest, "x");
  EXPECT_EQ(cache.Get(4, "a"), nullptr);  // another round: a miss
  EXPECT_EQ(cache.Get(3, "b"), nullptr);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
}

TEST(PendingShareCacheTest, AFirstEntryIsNeverReplaced) {
  // A conflicting upload under a used id must not displace the stored one.
  PendingShareCache cache(1000);
  ASSERT_TRUE(cache.Put(1, "a", Share("first"), 10));
  EXPECT_FALSE(cache.Put(1, "a", Share("second"), 10));
  EXPECT_EQ(cache.Get(1, "a")->ticket_digest, "first");
  EXPECT_EQ(cache.bytes(), 10);
}

TEST(PendingShareCacheTest, StaysWithinItsBudget) {
  PendingShareCache cache(25);
  EXPECT_TRUE(cache.Put(1, "a", Share("a"), 10));
  EXPECT_TRUE(cache.Put(1, "b", Share("b"), 10));
  EXPECT_FALSE(cache.Put(1, "c", Share("c"), 10));  // 30 > 25: dropped
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.bytes(), 20);
  cache.Erase({"a", "unknown"});
  EXPECT_EQ(cache.bytes(), 10);
  EXPECT_TRUE(cache.Put(1, "c", Share("c"), 10));  // room again
  EXPECT_EQ(cache.Get(1, "a"), nullptr);
  EXPECT_NE(cache.Get(1, "c"), nullptr);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_EQ(cache.Get(1, "b"), nullptr);
}

TEST(PendingShareCacheTest, ZeroBudgetCachesNothingAndNullIsRefused) {
  PendingShareCache off(0);
  EXPECT_FALSE(off.Put(1, "a", Share("a"), 1));
  EXPECT_EQ(off.Get(1, "a"), nullptr);
  PendingShareCache cache(100);
  EXPECT_FALSE(cache.Put(1, "a", nullptr, 1));
  EXPECT_FALSE(cache.Put(1, "a", Share("a"), -1));
  EXPECT_EQ(cache.size(), 0);
}

TEST(PendingShareCacheTest, AnEntryOutlivesItsEraseWhileInUse) {
  // Verification holds a shared_ptr while a concurrent commit erases it.
  PendingShareCache cache(100);
  ASSERT_TRUE(cache.Put(1, "a", Share("kept"), 10));
  std::shared_ptr<const ParsedShare> held = cache.Get(1, "a");
  cache.Erase(std::vector<std::string>{"a"});
  EXPECT_EQ(held->ticket_digest, "kept");
}

}  // namespace
}  // namespace tandem::aggregator
