#include "base/large_buffers.h"

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem {

bool TuneAllocatorForLargeBuffers() {
#if defined(__GLIBC__)
  // Setting either disables glibc's dynamic threshold adjustment; 32 MiB
  // is the largest mmap threshold glibc accepts on 64-bit.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace tandem
