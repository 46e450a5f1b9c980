// Says why the leader's verification has stalled (issue 37: "every daemon
// says in its log and metrics why a round stalled"). The verification loop
// calls Observe() with each pass's status; the reporter turns a run of
// failed passes into a few log lines instead of silence (a failed pass used
// to be logged at VLOG(1) only) or a line every 100 ms:
//   - the first failure:        WARNING "verification stalled: <status>"
//   - every `repeat` after it:  WARNING "verification still stalled after
//                               <s> s (<n> failed passes): <status>"
//   - the first success after:  INFO "verification resumed after <s> s
//                               (<n> failed passes; last error: <status>)"
// and keeps the stall's length and last reason for metrics
// (tandem_aggregator_verification_stalled_seconds).
//
// Thread safety: Observe() from one thread (the loop); stalled_seconds()
// and last_error() from any thread.
#ifndef TANDEM_AGGREGATOR_SERVICE_STALL_REPORTER_H_
#define TANDEM_AGGREGATOR_SERVICE_STALL_REPORTER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::aggregator {

class StallReporter {
 public:
  explicit StallReporter(absl::Duration repeat = absl::Seconds(30)) : repeat_(repeat) {}

  // The log line this pass's outcome calls for (nullopt: none), with
  // whether it is a warning. `now` from the caller's clock.
  struct Line {
    bool warning = false;
    std::string text;
  };
  std::optional<Line> Observe(const absl::Status& pass, absl::Time now);

  // Seconds since the first failed pass of the current stall (0: none).
  double stalled_seconds(absl::Time now) const;
  // The last failed pass's status ("" when not stalled).
  std::string last_error() const;

 private:
  const absl::Duration repeat_;
  mutable absl::Mutex mu_;
  std::optional<absl::Time> since_ ABSL_GUARDED_BY(mu_);
  absl::Time last_line_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_STALL_REPORTER_H_
