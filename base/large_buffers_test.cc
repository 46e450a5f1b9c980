#include "base/large_buffers.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(LargeBuffers, AppliesOnGlibcAndAllocationStillWorks) {
#if defined(__SANITIZE_ADDRESS__)
  (void)TuneAllocatorForLargeBuffers();  // ASan's allocator ignores mallopt
#elif defined(__GLIBC__)
  EXPECT_TRUE(TuneAllocatorForLargeBuffers());
#else
  EXPECT_FALSE(TuneAllocatorForLargeBuffers());
#endif
  // A share-sized block and one above the new mmap threshold.
  for (size_t n : {size_t{134443}, size_t{80} << 20}) {
    std::unique_ptr<char[]> p(new char[n]);
    std::memset(p.get(), 0x5a, n);
    EXPECT_EQ(p[n - 1], 0x5a);
  }
}

}  // namespace
}  // namespace tandem
