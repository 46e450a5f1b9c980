#include "ml/worker/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <utility>

namespace tandem::ml::worker {

void AdviseHugePages(void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePageAdviceBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) {
    // Advice only: on failure the pages stay ordinary ones.
    (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
}

std::vector<float> AdvisedFloats(size_t n) {
  std::vector<float> v;
  v.reserve(n);  // allocated (for large n: mapped), not yet touched
  AdviseHugePages(v.data(), n * sizeof(float));
  v.resize(n);
  return v;
}

void ReserveAdvised(std::string* s, size_t bytes) {
  if (s->capacity() >= bytes) return;
  std::string fresh;
  fresh.reserve(bytes);
  AdviseHugePages(fresh.data(), bytes);
  fresh.append(*s);
  *s = std::move(fresh);
}

}  // namespace tandem::ml::worker
