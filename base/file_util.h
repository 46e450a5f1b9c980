// Whole-file writes that a crash cannot tear: the bytes go to a temporary
// file beside `path`, are fsynced, renamed over `path`, and the directory
// is fsynced, so a reader (or a restart) sees the old file or the new one,
// never a part. Used for released models (safetensors) and the task API's
// stored weights.
// Thread safety: a function; one writer per path.
#ifndef TANDEM_BASE_FILE_UTIL_H_
#define TANDEM_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem {

// INTERNAL naming the file and the system's reason when any step fails
// (the temporary is removed). `mode`: the new file's permission bits.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes, mode_t mode);

}  // namespace tandem

#endif  // TANDEM_BASE_FILE_UTIL_H_
