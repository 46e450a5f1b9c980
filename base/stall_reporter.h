// Says why something a daemon retries has stalled (issue 37: "every daemon
// says in its log and metrics why a round stalled"): the leader's
// verification passes (subject "verification", attempts "passes"), the
// coordinator's store writes. The caller hands Observe() each attempt's
// status; the reporter turns a run of failures into a few log lines instead
// of silence or a line per attempt:
//   - the first failure:        WARNING "<subject> stalled: <status>"
//   - every `repeat` after it:  WARNING "<subject> still stalled after <s> s
//                               (<n> failed <attempts>): <status>"
//   - the first success after:  INFO "<subject> resumed after <s> s (<n>
//                               failed <attempts>; last error: <status>)"
// and keeps the stall's length and last reason for metrics (e.g.
// tandem_aggregator_verification_stalled_seconds).
//
// Thread-safe.
#ifndef TANDEM_BASE_STALL_REPORTER_H_
#define TANDEM_BASE_STALL_REPORTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

class StallReporter {
 public:
  // `subject` names what stalls, `attempts` its tries (plural), as in the
  // lines above; `what_next` ends the first line (e.g. "pending reports
  // wait and the pass is retried").
  StallReporter(std::string subject, std::string attempts, std::string what_next,
                absl::Duration repeat = absl::Seconds(30))
      : subject_(std::move(subject)),
        attempts_(std::move(attempts)),
        what_next_(std::move(what_next)),
        repeat_(repeat) {}

  // The log line this pass's outcome calls for (nullopt: none), with
  // whether it is a warning. `now` from the caller's clock.
  struct Line {
    bool warning = false;
    std::string text;
  };
  std::optional<Line> Observe(const absl::Status& pass, absl::Time now);
  // Observe(), and the line it calls for, if any, logged (TANDEM_LOG, as a
  // warning or at INFO) after `prefix`.
  void ObserveAndLog(const absl::Status& pass, absl::Time now, absl::string_view prefix = "");

  // Seconds since the first failed pass of the current stall (0: none).
  double stalled_seconds(absl::Time now) const;
  // The last failed pass's status ("" when not stalled).
  std::string last_error() const;

 private:
  const std::string subject_;
  const std::string attempts_;
  const std::string what_next_;
  const absl::Duration repeat_;
  mutable absl::Mutex mu_;
  std::optional<absl::Time> since_ ABSL_GUARDED_BY(mu_);
  absl::Time last_line_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_BASE_STALL_REPORTER_H_
