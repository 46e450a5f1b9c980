// Test allocator: host memory behind the KvAllocator seam that does not let
// the host read it in place (HostView null), as device memory would not, so
// that tests exercise the copying paths a CUDA worker takes. Thread-safe.
#ifndef TANDEM_ML_WORKER_KV_ALLOCATOR_TESTING_H_
#define TANDEM_ML_WORKER_KV_ALLOCATOR_TESTING_H_

#include <cstddef>

#include "ml/worker/kv_allocator.h"

namespace tandem::ml::worker {

class OpaqueKvAllocator final : public KvAllocator {
 public:
  absl::string_view backend() const override { return "opaque"; }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return host_.Allocate(bytes); }
  void Free(void* buffer, size_t bytes) override { host_.Free(buffer, bytes); }
  absl::Status CopyIn(void* buffer, size_t offset, const void* host, size_t bytes) override {
    return host_.CopyIn(buffer, offset, host, bytes);
  }
  absl::Status CopyOut(const void* buffer, size_t offset, void* host, size_t bytes) const override {
    return host_.CopyOut(buffer, offset, host, bytes);
  }

 private:
  HostKvAllocator host_;
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KV_ALLOCATOR_TESTING_H_
