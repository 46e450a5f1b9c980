// The KV caches tandem-worker holds as resources, one per sequence: keys
// and values (heads, tokens, head_dim) float32 and, optionally, each
// token's Spotlight code per head, kept where the allocator puts them
// (device memory on a CUDA worker, host memory otherwise) and read by the
// kernels a request names the cache for (kernel_registry.h).
//
//   Create(spec)                     validate -> publish an empty cache
//   Append(name, keys, values, codes) validate -> budget -> pages -> copy
//   ReadFloats / ReadCodes           a prefix of the keys, values or codes
//   GatherRows                       chosen rows of the keys or values only
//   ScanCodes / ScanRows             codes, or keys and values, in place (host memory)
//   Drop / List / Find               free, describe
//
// Codes are supplied by the client with every append (the output `codes`
// of spotlight.hash, with weights sent or a loaded "spotlight.hash" model),
// not computed here: that is the form spotlight.topk already takes its key
// codes in, it keeps the hash (and its training) out of the cache, and a
// cache then works with any code width the client's hash produces.
//
// Storage: pages from the allocator (kv_allocator.h), each holding
// `capacity` tokens of every head: [keys H x cap x d][values H x cap x d]
// [codes H x cap x words] (words = code_bits / 32). Appends fill the last
// page and add pages; a token is never copied again once stored. A new
// page holds max(tokens held, tokens still to store) tokens, clamped to
// [min_page_tokens, max_page_tokens]: page counts grow logarithmically up
// to the cap and at most about half of the capacity stays unused.
//
// Budget: the bytes of all pages of all caches are at most max_bytes; an
// append that would pass it fails with RESOURCE_EXHAUSTED "out of memory"
// and leaves the cache as it was.
//
// Errors: NOT_FOUND "KV cache 'x' does not exist"; FAILED_PRECONDITION when
// a name is created again without replace, or a read asks for more tokens
// than held; INVALID_ARGUMENT for a bad name, spec, shape, head or a
// non-finite value; RESOURCE_EXHAUSTED as above.
//
// Thread safety: all methods may be called concurrently. Each cache has its
// own reader/writer lock (appends hold it alone, reads share it); the
// store's lock is never held while waiting for a cache's. A cache dropped
// during an append stays alive until the append ends, which then fails
// with NOT_FOUND. Reads copy out a prefix and hold no lock afterwards.
#ifndef TANDEM_ML_WORKER_KV_CACHE_STORE_H_
#define TANDEM_ML_WORKER_KV_CACHE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"
#include "ml/worker/kv_allocator.h"

namespace tandem::ml::worker {

struct KvCacheShape {
  int heads = 0;      // [1, kMaxKvHeads]
  int head_dim = 0;   // [1, kMaxKvHeadDim]
  int code_bits = 0;  // 0, or a multiple of 32 in [32, kMaxKvCodeBits]
  int64_t code_bytes() const { return code_bits / 8; }
  // Bytes one token takes over all heads (keys, values, codes).
  int64_t token_bytes() const;
};

inline constexpr int kMaxKvHeads = 1024;
inline constexpr int kMaxKvHeadDim = 4096;
inline constexpr int kMaxKvCodeBits = 4096;

// What a cache is now (no data).
struct KvCacheSummary {
  std::string name;
  KvCacheShape shape;
  int64_t tokens = 0;
  int64_t capacity_tokens = 0;
  int64_t bytes = 0;  // allocated pages, charged to the budget
  std::string backend;
};

// Which float part of a cache to read.
enum class KvPart { kKeys, kValues };

struct KvCacheStoreOptions {
  int64_t max_bytes = 0;  // budget of all caches' pages, >= 0
  // Budget of one owner's caches (KvCacheStore::Key), so that one caller
  // cannot take the whole of max_bytes from the others; 0 = none but
  // max_bytes. >= 0.
  int64_t max_bytes_per_owner = 0;
  int64_t min_page_tokens = 64;       // >= 1
  int64_t max_page_tokens = 1 << 16;  // >= min_page_tokens
};

class KvCacheStore {
 public:
  // INVALID_ARGUMENT for a null allocator, a negative budget or page sizes
  // out of order. Takes ownership of the allocator.
  static absl::StatusOr<std::unique_ptr<KvCacheStore>> Create(
      KvCacheStoreOptions options, std::unique_ptr<KvAllocator> allocator);
  ~KvCacheStore();
  KvCacheStore(const KvCacheStore&) = delete;
  KvCacheStore& operator=(const KvCacheStore&) = delete;

  // Caches are addressed by key. The worker keys every cache by its
  // creator's identity (the caller's TLS identity, empty on a plaintext
  // worker): Key(owner, name) is "hex(owner)/name", or `name` alone for the
  // empty owner, so that one caller's requests never reach, list, append to
  // or drop another's caches, and two callers may use the same name. Errors
  // and NameOf show the name part only. Not validated here (the store
  // validates keys when a cache is created).
  static std::string Key(absl::string_view owner, absl::string_view name);
  static absl::string_view NameOf(absl::string_view key);
  // "hex(owner)/" of a key, or "" for an unowned one: List() entries whose
  // key starts with Key(owner, "") belong to `owner` (for the empty owner,
  // those with an empty prefix).
  static absl::string_view OwnerPrefixOf(absl::string_view key);

  // An empty cache (no pages, 0 bytes). With `replace`, a cache of the
  // same name is dropped first (its pages freed once unused).
  absl::StatusOr<KvCacheSummary> CreateCache(const std::string& name, const KvCacheShape& shape,
                                             bool replace);
  // RESOURCE_EXHAUSTED unless appending `tokens` tokens to `name` fits the
  // budget now (an early refusal, before an append's data has arrived);
  // NOT_FOUND for an unknown name.
  absl::Status CheckAppendFits(const std::string& name, int64_t tokens) const;
  // Appends n tokens: keys and values (heads, n, head_dim), codes n tokens
  // of every head, (heads, n, code_bytes) bytes row-major (empty for a
  // cache without codes). n >= 1. Returns the summary after the append.
  absl::StatusOr<KvCacheSummary> Append(const std::string& name, const kernels::Tensor& keys,
                                        const kernels::Tensor& values, absl::string_view codes);
  // The first `tokens` tokens (0 = all held) of the keys or values as
  // (heads, tokens, head_dim). FAILED_PRECONDITION for an empty cache or
  // more tokens than held.
  absl::StatusOr<kernels::Tensor> ReadFloats(const std::string& name, KvPart part,
                                             int64_t tokens) const;
  // Rows of the first `tokens` tokens (0 = all held), copying those rows
  // only (a decode step's gather, not the whole cache): for KV head h the
  // keys (or values) at positions[cu[h] .. cu[h + 1]) (any order, repeats
  // allowed), row after row into `out` (positions.size() x head_dim floats).
  // cu: heads + 1 non-decreasing offsets from 0 to positions.size().
  // INVALID_ARGUMENT for a cu of another shape, a position outside the
  // prefix or an `out` of another size; FAILED_PRECONDITION as ReadFloats.
  // Returns the token count the positions were checked against.
  absl::StatusOr<int64_t> GatherRows(const std::string& name, KvPart part, int64_t tokens,
                                     absl::Span<const int64_t> positions,
                                     absl::Span<const int64_t> cu, absl::Span<float> out) const;
  // The codes of head `head` for the first `tokens` tokens (0 = all):
  // tokens x code_bytes bytes. INVALID_ARGUMENT for a head out of range or
  // a cache without codes; FAILED_PRECONDITION as ReadFloats.
  absl::StatusOr<std::string> ReadCodes(const std::string& name, int head, int64_t tokens) const;
  // Head `head`'s codes of the first `tokens` tokens (0 = all) in place, no
  // copy: fn(codes, first, n) for consecutive runs (one per page), codes
  // pointing at n x code_bits / 32 uint32 words of tokens [first, first + n),
  // called under the cache's read lock (appends wait; fn must not call the
  // store). UNIMPLEMENTED where the allocator's memory is not host-readable
  // (use ReadCodes); other errors as ReadCodes. Returns the tokens scanned.
  absl::StatusOr<int64_t> ScanCodes(
      const std::string& name, int head, int64_t tokens,
      absl::FunctionRef<void(const uint32_t* codes, int64_t first, int64_t n)> fn) const;
  // Head `head`'s keys and values of the first `tokens` tokens (0 = all) in
  // place, as ScanCodes: fn(keys, values, first, n), each pointing at
  // n x head_dim floats. INVALID_ARGUMENT for a head out of range;
  // UNIMPLEMENTED where pages are not host-readable (use ReadFloats);
  // FAILED_PRECONDITION as ReadFloats.
  absl::StatusOr<int64_t> ScanRows(
      const std::string& name, int head, int64_t tokens,
      absl::FunctionRef<void(const float* keys, const float* values, int64_t first, int64_t n)> fn)
      const;

  // Frees the cache; returns its bytes.
  absl::StatusOr<int64_t> Drop(const std::string& name);
  absl::StatusOr<KvCacheSummary> Find(const std::string& name) const;
  std::vector<KvCacheSummary> List() const;  // sorted by name

  int64_t used_bytes() const;
  int64_t max_bytes() const { return options_.max_bytes; }
  absl::string_view backend() const { return allocator_->backend(); }

 private:
  struct Page;
  struct Entry;
  KvCacheStore(KvCacheStoreOptions options, std::unique_ptr<KvAllocator> allocator)
      : options_(options), allocator_(std::move(allocator)) {}

  absl::StatusOr<std::shared_ptr<Entry>> Lookup(const std::string& name) const;
  // Capacities of the pages an append of `tokens` to `e` adds.
  // REQUIRES: e's lock held (shared or alone).
  std::vector<int64_t> PlanPages(const Entry& e,
                                 int64_t tokens) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // RESOURCE_EXHAUSTED unless `bytes` more for the cache keyed `key` fit
  // both the store's and its owner's budget.
  absl::Status FitsLocked(const std::string& key, int64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `delta` bytes to the store's and `key`'s owner's use.
  void ChargeLocked(const std::string& key, int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held, and e's lock for an exact token count.
  KvCacheSummary Summarize(const Entry& e) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The token count a read of `tokens` (0 = all) covers; FAILED_PRECONDITION
  // for an empty cache or more than held. REQUIRES: e's lock held shared.
  absl::StatusOr<int64_t> PrefixLocked(const Entry& e,
                                       int64_t tokens) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // fn(page base, page, first, n) for the pages of e's first `tokens`
  // tokens (0 = all), under e's read lock; UNIMPLEMENTED for pages the host
  // cannot read. Returns the tokens walked.
  absl::StatusOr<int64_t> ScanInPlace(
      const Entry& e, int64_t tokens,
      absl::FunctionRef<void(const char* page, const Page& p, int64_t first, int64_t n)> fn) const;

  const KvCacheStoreOptions options_;
  const std::unique_ptr<KvAllocator> allocator_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> caches_ ABSL_GUARDED_BY(mu_);
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes per owner (OwnerPrefixOf of the keys; no entry at 0).
  std::map<std::string, int64_t> used_by_owner_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KV_CACHE_STORE_H_
