#include "ml/worker/huge_pages.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::ml::worker {
namespace {

// The advice changes how memory is backed, never what it holds.
TEST(HugePages, AdvisedFloatsAreZerosOfTheAskedLength) {
  for (size_t n : {size_t{0}, size_t{3}, (kHugePageAdviceBytes / sizeof(float)) + 5}) {
    const std::vector<float> v = AdvisedFloats(n);
    ASSERT_EQ(v.size(), n);
    for (float x : v) ASSERT_EQ(x, 0.0f);
  }
}

TEST(HugePages, ReserveAdvisedKeepsTheContentAndGrowsTheCapacity) {
  std::string s = "header";
  ReserveAdvised(&s, kHugePageAdviceBytes + 1);
  EXPECT_EQ(s, "header");
  EXPECT_GE(s.capacity(), kHugePageAdviceBytes + 1);
  const char* data = s.data();
  ReserveAdvised(&s, 16);  // already large enough: untouched
  EXPECT_EQ(s.data(), data);
  s.append(kHugePageAdviceBytes - 5, 'x');
  EXPECT_EQ(s.size(), kHugePageAdviceBytes + 1);
}

TEST(HugePages, AdviceOnSmallOrNullRangesIsANoOp) {
  AdviseHugePages(nullptr, kHugePageAdviceBytes * 2);
  char small[64] = {1};
  AdviseHugePages(small, sizeof(small));
  EXPECT_EQ(small[0], 1);
}

}  // namespace
}  // namespace tandem::ml::worker
