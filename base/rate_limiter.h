// Keyed token buckets: at most `rate` events per second per key, bursts of
// up to `burst` (the check-in limits per device and per source address of
// tandem-coordinator; issue 34 item 3).
//
// Memory is bounded: at most max_keys buckets are kept; when full, buckets
// that have refilled completely (idle keys: forgetting them changes no
// decision) are dropped first, and if none has, the new key is refused
// (fail closed under a flood of distinct keys, counted by the caller).
//
// Thread safety: thread-safe (one internal mutex). The clock is not owned.
#ifndef TANDEM_BASE_RATE_LIMITER_H_
#define TANDEM_BASE_RATE_LIMITER_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tandem {

class RateLimiter {
 public:
  // rate <= 0 disables the limiter (Allow is always true). burst >= 1.
  RateLimiter(double rate, double burst, size_t max_keys, const Clock* clock);

  // Takes one token of `key`'s bucket; false when it has none.
  bool Allow(absl::string_view key);
  bool enabled() const { return rate_ > 0; }
  size_t keys() const;

 private:
  struct Bucket {
    double tokens;
    absl::Time updated;
  };
  void Refill(Bucket& b, absl::Time now) const;

  const double rate_;
  const double burst_;
  const size_t max_keys_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_BASE_RATE_LIMITER_H_
