#include "base/rate_limiter.h"

#include <algorithm>
#include <vector>

namespace tandem {

RateLimiter::RateLimiter(double rate, double burst, size_t max_keys, const Clock* clock)
    : rate_(rate),
      burst_(std::max(1.0, burst)),
      max_keys_(std::max<size_t>(1, max_keys)),
      clock_(clock) {}

void RateLimiter::Refill(Bucket& b, absl::Time now) const {
  const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - b.updated));
  b.tokens = std::min(burst_, b.tokens + elapsed * rate_);
  b.updated = now;
}

bool RateLimiter::Allow(absl::string_view key) {
  if (rate_ <= 0) return true;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) {
      // Forget idle keys (full buckets): they would be allowed anyway.
      std::vector<std::string> idle;
      for (auto& [k, b] : buckets_) {
        Refill(b, now);
        if (b.tokens >= burst_) idle.push_back(k);
      }
      for (const std::string& k : idle) buckets_.erase(k);
      if (buckets_.size() >= max_keys_) return false;
    }
    it = buckets_.emplace(std::string(key), Bucket{burst_, now}).first;
  }
  Refill(it->second, now);
  if (it->second.tokens < 1.0) return false;
  it->second.tokens -= 1.0;
  return true;
}

size_t RateLimiter::keys() const {
  absl::MutexLock lock(&mu_);
  return buckets_.size();
}

}  // namespace tandem
