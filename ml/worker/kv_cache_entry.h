// The store's per-cache state (kv_cache_store.h's private Page and Entry),
// shared by kv_cache_store.cc (create, append, drop) and kv_cache_reads.cc
// (reads, gathers and in-place scans). Internal to tandem_ml_worker.
#ifndef TANDEM_ML_WORKER_KV_CACHE_ENTRY_H_
#define TANDEM_ML_WORKER_KV_CACHE_ENTRY_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "ml/worker/kv_allocator.h"
#include "ml/worker/kv_cache_store.h"

namespace tandem::ml::worker {

// One allocation of `capacity` tokens of every head; see the header for
// the layout. Owned by its Entry, freed through the allocator.
struct KvCacheStore::Page {
  void* buffer = nullptr;
  int64_t capacity = 0;
  int64_t used = 0;  // tokens stored
};

// One cache. Its shape is immutable (read without the lock); pages and
// token count change under `mu` only.
struct KvCacheStore::Entry {
  Entry(std::string n, KvCacheShape s, KvAllocator* a) : name(std::move(n)), shape(s), alloc(a) {}
  ~Entry() {
    for (const Page& p : pages) alloc->Free(p.buffer, static_cast<size_t>(PageBytes(p.capacity)));
  }
  int64_t PageBytes(int64_t capacity) const { return capacity * shape.token_bytes(); }
  // Byte offsets in a page of `capacity` tokens.
  size_t KeysAt(int64_t cap, int head, int64_t token) const {
    return static_cast<size_t>((head * cap + token) * shape.head_dim) * sizeof(float);
  }
  size_t ValuesAt(int64_t cap, int head, int64_t token) const {
    return KeysAt(cap, shape.heads, 0) + KeysAt(cap, head, token);
  }
  size_t CodesAt(int64_t cap, int head, int64_t token) const {
    return 2 * KeysAt(cap, shape.heads, 0) +
           static_cast<size_t>((head * cap + token) * shape.code_bytes());
  }
  // fn(page, first, m) for the pages holding tokens [0, n), in order: the
  // page holds tokens [first, first + m). Stops at fn's first error.
  // REQUIRES: mu held (shared) and n <= tokens.
  absl::Status ForEachRun(
      int64_t n, absl::FunctionRef<absl::Status(const Page& page, int64_t first, int64_t m)> fn)
      const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int64_t at = 0;
    for (const Page& p : pages) {
      const int64_t m = std::min(p.used, n - at);
      if (m <= 0) break;
      TANDEM_RETURN_IF_ERROR(fn(p, at, m));
      at += m;
    }
    return absl::OkStatus();
  }

  const std::string name;
  const KvCacheShape shape;
  KvAllocator* const alloc;
  mutable absl::Mutex mu;  // appends hold it alone, reads share it
  std::vector<Page> pages ABSL_GUARDED_BY(mu);
  int64_t tokens ABSL_GUARDED_BY(mu) = 0;
  int64_t capacity ABSL_GUARDED_BY(mu) = 0;
  int64_t bytes = 0;  // guarded by the store's mu_
  bool live = true;   // guarded by the store's mu_
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KV_CACHE_ENTRY_H_
