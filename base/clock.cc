#include "base/clock.h"

#include "absl/time/clock.h"

namespace tandem {

RealClock* RealClock::Default() {
  static RealClock* clock = new RealClock();
  return clock;
}

absl::Time RealClock::Now() const { return absl::Now(); }

void RealClock::SleepFor(absl::Duration d) { absl::SleepFor(d); }

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SleepFor(absl::Duration d) { Advance(d); }

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  if (d > absl::ZeroDuration()) now_ += d;
}

void FakeClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

}  // namespace tandem
