// Names of the worker's resources (models, KV caches): 1 to 128 characters
// of [A-Za-z0-9._-]. Pure; thread-safe.
#ifndef TANDEM_ML_WORKER_RESOURCE_NAME_H_
#define TANDEM_ML_WORKER_RESOURCE_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tandem::ml::worker {

// OK, or INVALID_ARGUMENT naming `what` ("model", "KV cache") and the rule.
inline absl::Status CheckResourceName(absl::string_view what, absl::string_view name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(what, " name must have 1 to 128 characters"));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " name '", name, "' may only hold [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_RESOURCE_NAME_H_
