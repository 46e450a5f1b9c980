// The identifier syntax every tandem wire message uses for task and client
// ids: [A-Za-z0-9._-]{1,64} (safe in file names, SQL text and logs).
// Header-only; thread-safe.
#ifndef TANDEM_BASE_IDS_H_
#define TANDEM_BASE_IDS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem {

inline bool IsValidId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// INVALID_ARGUMENT "<what> must match [A-Za-z0-9._-]{1,64}" unless valid.
inline absl::Status ValidateId(absl::string_view id, absl::string_view what) {
  if (IsValidId(id)) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(what) + " must match [A-Za-z0-9._-]{1,64}");
}

}  // namespace tandem

#endif  // TANDEM_BASE_IDS_H_
