// Allocator settings for processes that churn large buffers (an aggregator
// allocates and frees two ~134 KB report shares per upload at D = 2^20).
//
// glibc serves blocks above M_MMAP_THRESHOLD (128 KiB until its dynamic
// adjustment catches up) with a fresh mmap, and returns the top of each
// arena to the kernel above M_TRIM_THRESHOLD: either way every upload
// page-faults its buffers in again (clear_page was 14.5 % of the pair
// benchmark's CPU at D = 2^17, bench/README.md). TuneAllocatorForLargeBuffers
// keeps blocks up to 32 MiB in the arenas and trims above 512 MiB only.
// Memory stays bounded by the peak working set, which the daemons already
// bound (upload receive limits, one accumulator per task).
//
// Call once at the start of main, before threads start. No-op off glibc.
// Thread-compatible.
#ifndef TANDEM_BASE_LARGE_BUFFERS_H_
#define TANDEM_BASE_LARGE_BUFFERS_H_

namespace tandem {

// True when the settings were applied (glibc), false elsewhere.
bool TuneAllocatorForLargeBuffers();

}  // namespace tandem

#endif  // TANDEM_BASE_LARGE_BUFFERS_H_
