#include "aggregator/core/share_cache.h"

#include <utility>

namespace tandem::aggregator {

bool PendingShareCache::Put(int64_t round_id, absl::string_view report_id,
                            std::shared_ptr<const ParsedShare> share, int64_t stored_bytes) {
  if (share == nullptr || stored_bytes < 0) return false;
  absl::MutexLock lock(&mu_);
  if (bytes_ + stored_bytes > max_bytes_) return false;
  const bool inserted =
      entries_.try_emplace(report_id, Entry{round_id, stored_bytes, std::move(share)}).second;
  if (inserted) bytes_ += stored_bytes;
  return inserted;
}

std::shared_ptr<const ParsedShare> PendingShareCache::Get(int64_t round_id,
                                                          absl::string_view report_id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(report_id);
  if (it == entries_.end() || it->second.round_id != round_id) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return it->second.share;
}

void PendingShareCache::Erase(absl::Span<const std::string> report_ids) {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : report_ids) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    bytes_ -= it->second.bytes;
    entries_.erase(it);
  }
}

void PendingShareCache::Clear() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  bytes_ = 0;
}

int64_t PendingShareCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}
int64_t PendingShareCache::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}
int64_t PendingShareCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}
int64_t PendingShareCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

}  // namespace tandem::aggregator
