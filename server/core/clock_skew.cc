#include "server/core/clock_skew.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/logging.h"

namespace tandem::server {

void ClockSkewMonitor::Observe(absl::string_view role, absl::Time sent, absl::Time received,
                               const proto::OpenRoundResponse& response) {
  if (response.now_unix_ms() == 0 || received < sent) return;
  const absl::Time midpoint = sent + (received - sent) / 2;
  const int64_t offset_ms = response.now_unix_ms() - absl::ToUnixMillis(midpoint);
  const int64_t tolerance_ms = response.max_clock_skew_ms();
  const int64_t magnitude = std::llabs(offset_ms);
  Level level = Level::kWithin;
  if (magnitude > tolerance_ms) {
    level = Level::kBeyond;
  } else if (2 * magnitude > tolerance_ms) {
    level = Level::kNearLimit;
  }
  Level before;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = readings_.try_emplace(std::string(role));
    before = inserted ? Level::kWithin : it->second.level;
    it->second = Reading{offset_ms, level};
  }
  if (level == before) return;
  // Whole seconds from one on (the reading's error is a half round trip).
  const absl::Duration shown =
      magnitude >= 1000 ? absl::Seconds((magnitude + 500) / 1000) : absl::Milliseconds(magnitude);
  const std::string what = absl::StrCat(
      "the ", role, "'s clock is ", absl::FormatDuration(shown),
      offset_ms >= 0 ? " ahead of" : " behind", " this coordinator's (+-",
      absl::FormatDuration(absl::Ceil((received - sent) / 2, absl::Milliseconds(1))),
      "); it tolerates ", absl::FormatDuration(absl::Milliseconds(tolerance_ms)), " of skew");
  switch (level) {
    case Level::kBeyond:
      TANDEM_LOG(WARNING) << "coordinator: " << what
                          << (offset_ms >= 0
                                  ? ": it refuses uploads as expired before their deadline; "
                                    "synchronize the clocks (NTP)"
                                  : ": it accepts uploads after their deadline until the "
                                    "round is finalized; synchronize the clocks (NTP)");
      break;
    case Level::kNearLimit:
      TANDEM_LOG(WARNING) << "coordinator: " << what
                          << ": more than half of it; synchronize the clocks (NTP)";
      break;
    case Level::kWithin:
      TANDEM_LOG(INFO) << "coordinator: " << what << ": back within half of it";
      break;
  }
}

std::map<std::string, int64_t> ClockSkewMonitor::OffsetsMs() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [role, r] : readings_) out[role] = r.offset_ms;
  return out;
}

}  // namespace tandem::server
