// How far each aggregator's clock is from this coordinator's. Tickets
// expire, and rounds end, at a time set on the coordinator's clock and
// checked on the aggregators' (aggregator/core/aggregator.h
// max_clock_skew); a skew beyond what an aggregator tolerates makes it
// refuse every upload as expired, which this monitor turns into a log line
// that says so and a number in Status and /metrics.
//
// Measurement: Cristian's algorithm (Cristian 1989, "Probabilistic clock
// synchronization"): the aggregator's clock at OpenRound against the
// midpoint of the call on this clock; the error is at most half the round
// trip. One reading per aggregator per round; the last one is kept.
//
// Log lines (WARNING), only when an aggregator's state changes: its offset
// exceeds half its tolerance ("uploads near the deadline may be refused"),
// exceeds its tolerance ("uploads are refused as expired"), or comes back
// within half (INFO).
//
// Thread-safe. The clock is not owned and must outlive the monitor.
#ifndef TANDEM_SERVER_CORE_CLOCK_SKEW_H_
#define TANDEM_SERVER_CORE_CLOCK_SKEW_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "proto/aggregator.pb.h"

namespace tandem::server {

class ClockSkewMonitor {
 public:
  // `clock` must not be null.
  explicit ClockSkewMonitor(const Clock* clock) : clock_(clock) {}

  absl::Time Now() const { return clock_->Now(); }
  // One reading of `role`'s clock: the call left at `sent` and was answered
  // at `received` (this clock's Now()). Ignored when the aggregator did not
  // say its time (now_unix_ms == 0) or `received` < `sent`.
  void Observe(absl::string_view role, absl::Time sent, absl::Time received,
               const proto::OpenRoundResponse& response) ABSL_LOCKS_EXCLUDED(mu_);
  // The last offset of each aggregator that said its time (ms; positive:
  // its clock is ahead of this coordinator's).
  std::map<std::string, int64_t> OffsetsMs() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Level { kWithin, kNearLimit, kBeyond };
  struct Reading {
    int64_t offset_ms = 0;
    Level level = Level::kWithin;
  };

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, Reading, std::less<>> readings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_CLOCK_SKEW_H_
