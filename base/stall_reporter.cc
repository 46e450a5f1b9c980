#include "base/stall_reporter.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/logging.h"

namespace tandem {

std::optional<StallReporter::Line> StallReporter::Observe(const absl::Status& pass,
                                                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (pass.ok()) {
    if (!since_.has_value()) return std::nullopt;
    Line line{false, absl::StrFormat("%s resumed after %.1f s (%d failed %s; last error: %s)",
                                     subject_, absl::ToDoubleSeconds(now - *since_), failures_,
                                     attempts_, last_error_)};
    since_.reset();
    failures_ = 0;
    last_error_.clear();
    return line;
  }
  ++failures_;
  last_error_ = pass.ToString();
  if (!since_.has_value()) {
    since_ = now;
    last_line_ = now;
    return Line{true, absl::StrCat(subject_, " stalled: ", last_error_, "; ", what_next_)};
  }
  if (now - last_line_ < repeat_) return std::nullopt;
  last_line_ = now;
  return Line{true, absl::StrFormat("%s still stalled after %.1f s (%d failed %s): %s", subject_,
                                    absl::ToDoubleSeconds(now - *since_), failures_, attempts_,
                                    last_error_)};
}

void StallReporter::ObserveAndLog(const absl::Status& pass, absl::Time now,
                                  absl::string_view prefix) {
  std::optional<Line> line = Observe(pass, now);
  if (!line.has_value()) return;
  if (line->warning) {
    TANDEM_LOG(WARNING) << prefix << line->text;
  } else {
    TANDEM_LOG(INFO) << prefix << line->text;
  }
}

double StallReporter::stalled_seconds(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return since_.has_value() ? absl::ToDoubleSeconds(now - *since_) : 0.0;
}

std::string StallReporter::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace tandem
