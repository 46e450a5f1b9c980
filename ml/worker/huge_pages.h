// Large tensor buffers backed by transparent huge pages. A fresh 64 MiB
// buffer costs 16384 page faults with 4 KiB pages - about 250 ms in a
// virtual machine, forty times a memcpy of it - and 32 with 2 MiB pages.
// Hosts with transparent_hugepage=madvise (the Debian default) give huge
// pages only to memory that asks for them: these helpers ask, for buffers of
// at least kHugePageAdviceBytes, before the first touch. Where the kernel
// refuses (THP "never", no memory to compact), the buffers are ordinary
// ones: the advice never fails a call. Thread-safe (no shared state). The
// process's allocator settings for large buffers (glibc otherwise unmaps and
// faults in gRPC's read buffers and 1 MiB chunks again and again) are
// base/large_buffers.h's, applied by tandem-worker's main.
#ifndef TANDEM_ML_WORKER_HUGE_PAGES_H_
#define TANDEM_ML_WORKER_HUGE_PAGES_H_

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::ml::worker {

inline constexpr size_t kHugePageAdviceBytes = size_t{4} << 20;

// madvise(MADV_HUGEPAGE) on the whole 2 MiB pages inside [data, data + bytes)
// when bytes >= kHugePageAdviceBytes; a no-op otherwise.
void AdviseHugePages(void* data, size_t bytes);

// `n` zero floats in a vector whose buffer was advised before it was touched.
std::vector<float> AdvisedFloats(size_t n);

// Reserves `bytes` in `s` (empty or not) and advises the new buffer before
// it is written.
void ReserveAdvised(std::string* s, size_t bytes);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_HUGE_PAGES_H_
