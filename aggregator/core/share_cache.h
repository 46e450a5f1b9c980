// Parsed shares of pending reports, kept from upload to verification.
//
// A server stores every upload durably before it acknowledges it and, until
// now, read the share back, checked it and parsed it again when it verified
// the report, and once more when the helper committed it: three reads and
// two parses of ~134 KB per report and server, most of the ingest cost
// beside the one expansion (bench/README.md, issue 18). The cache keeps
// what the upload already parsed and validated, for the verification to use
// instead; the store stays the record: a cached entry is added only after
// the store acknowledged that exact share durably, is immutable, and is
// used only for the report id and round it was stored under. A miss
// (restart, eviction, another replica's upload, a full cache) reads the
// store as before, so the cache changes costs, never results.
//
// Bounded by `max_bytes` (the shares' stored sizes): a Put that would go
// over it is dropped (first come, first kept: pending reports are verified
// roughly in upload order, and entries leave when their report is decided,
// or all of them when the task opens its next round). An upload thread
// descheduled between its store commit and its Put for longer than a whole
// verification of that report leaves an entry for a decided report until
// the round ends: it costs budget, never a result.
// Thread-safe (its own mutex): uploads Put while verification Gets/Erases.
#ifndef TANDEM_AGGREGATOR_CORE_SHARE_CACHE_H_
#define TANDEM_AGGREGATOR_CORE_SHARE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "aggregator/core/norm_verification.h"

namespace tandem::aggregator {

class PendingShareCache {
 public:
  // `max_bytes` <= 0 disables the cache (every Get misses).
  explicit PendingShareCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `share` (stored as `stored_bytes` bytes) for `report_id` of round
  // `round_id`, unless it would exceed the budget or the id is cached
  // already. Returns whether it was kept.
  bool Put(int64_t round_id, absl::string_view report_id, std::shared_ptr<const ParsedShare> share,
           int64_t stored_bytes);
  // The share cached for `report_id` in round `round_id`; null when absent
  // (or cached for another round).
  std::shared_ptr<const ParsedShare> Get(int64_t round_id, absl::string_view report_id) const;
  // Forgets decided reports (unknown ids are ignored).
  void Erase(absl::Span<const std::string> report_ids);
  // Forgets everything (the task moved to another round).
  void Clear();

  int64_t bytes() const;
  int64_t size() const;
  // Lookups answered from the cache / missed, since construction.
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    int64_t round_id = 0;
    int64_t bytes = 0;
    std::shared_ptr<const ParsedShare> share;
  };
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_SHARE_CACHE_H_
