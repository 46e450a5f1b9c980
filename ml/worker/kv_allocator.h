// Where the pages of tandem-worker's KV caches (kv_cache_store.h) live: the
// storage seam between the store's bookkeeping and the memory itself.
//
//   HostKvAllocator     host memory, backend "cpu" (this file; always built)
//   a CUDA allocator    device memory (cudaMalloc / cudaMemcpy), backend
//                       "cuda": to be added beside ml/kernels/cuda, so that
//                       Spotlight retrieval, Ada-KV compaction and decode
//                       read the pages in place
//
// Buffers are opaque handles: the store never dereferences them, it only
// moves bytes in and out through CopyIn / CopyOut, so a device pointer can
// stand in for a host one. The budget is the store's business, not the
// allocator's; Allocate only reports what the memory itself refuses.
//
// Thread safety: implementations must allow concurrent calls (distinct
// buffers); the store never uses one buffer from two threads at once
// without its own lock.
#ifndef TANDEM_ML_WORKER_KV_ALLOCATOR_H_
#define TANDEM_ML_WORKER_KV_ALLOCATOR_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::ml::worker {

class KvAllocator {
 public:
  virtual ~KvAllocator() = default;

  // "cpu" or "cuda": where the buffers are (ListKvCaches, KvCacheInfo).
  virtual absl::string_view backend() const = 0;
  // A buffer of `bytes` (> 0) bytes, 64-byte aligned. RESOURCE_EXHAUSTED
  // "out of memory" when the memory refuses. The caller owns it and
  // returns it with Free.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // REQUIRES: `buffer` came from Allocate(bytes) and is not used any more.
  virtual void Free(void* buffer, size_t bytes) = 0;
  // Host bytes into a buffer at `offset`. INTERNAL on a device error.
  // REQUIRES: offset + bytes within the buffer.
  virtual absl::Status CopyIn(void* buffer, size_t offset, const void* host, size_t bytes) = 0;
  // Buffer bytes at `offset` out to host memory. INTERNAL on a device error.
  virtual absl::Status CopyOut(const void* buffer, size_t offset, void* host,
                               size_t bytes) const = 0;
  // The buffer's bytes readable in place by the host, or null where they
  // are not (device memory): CPU kernels then read through CopyOut.
  virtual const void* HostView(const void* buffer) const { return nullptr; }
};

// Host memory (aligned_alloc, memcpy): the backend of a worker without a
// device, and of every worker until the CUDA allocator exists. Stateless.
class HostKvAllocator final : public KvAllocator {
 public:
  absl::string_view backend() const override { return "cpu"; }
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* buffer, size_t bytes) override;
  absl::Status CopyIn(void* buffer, size_t offset, const void* host, size_t bytes) override;
  absl::Status CopyOut(const void* buffer, size_t offset, void* host, size_t bytes) const override;
  const void* HostView(const void* buffer) const override { return buffer; }
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KV_ALLOCATOR_H_
