#include "ml/worker/kv_allocator.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::ml::worker {

absl::StatusOr<void*> HostKvAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("a KV page of 0 bytes");
  const size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory: the host refused ", bytes, " bytes for a KV page"));
  }
  return p;
}

void HostKvAllocator::Free(void* buffer, size_t) { std::free(buffer); }

absl::Status HostKvAllocator::CopyIn(void* buffer, size_t offset, const void* host, size_t bytes) {
  if (bytes > 0) std::memcpy(static_cast<char*>(buffer) + offset, host, bytes);
  return absl::OkStatus();
}

absl::Status HostKvAllocator::CopyOut(const void* buffer, size_t offset, void* host,
                                      size_t bytes) const {
  if (bytes > 0) std::memcpy(host, static_cast<const char*>(buffer) + offset, bytes);
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
