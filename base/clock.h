// Time seam. Everything that waits, times out or stamps goes through a Clock
// so that tests can drive time with FakeClock instead of sleeping.
#ifndef TANDEM_BASE_CLOCK_H_
#define TANDEM_BASE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

// Thread-safe in all implementations.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  virtual void SleepFor(absl::Duration d) = 0;
};

// Wall clock. RealClock::Default() is a process-wide instance (never null,
// never destroyed).
class RealClock : public Clock {
 public:
  static RealClock* Default();
  absl::Time Now() const override;
  void SleepFor(absl::Duration d) override;
};

// Manually driven clock for tests. SleepFor(d) advances time by d at once,
// so code under test never blocks. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50));
  absl::Time Now() const override;
  void SleepFor(absl::Duration d) override;
  void Advance(absl::Duration d);
  void SetTime(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_BASE_CLOCK_H_
