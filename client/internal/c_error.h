// Internal: status -> C ABI return code, with the message copied into the
// caller's buffer (NUL-terminated, truncated). Shared by the C ABI files.
#ifndef TANDEM_CLIENT_INTERNAL_C_ERROR_H_
#define TANDEM_CLIENT_INTERNAL_C_ERROR_H_

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace tandem::client::internal {

inline int Fail(const absl::Status& s, char* error, size_t error_len) {
  if (error != nullptr && error_len > 0) {
    const std::string msg(s.message());
    const size_t n = std::min(msg.size(), error_len - 1);
    std::memcpy(error, msg.data(), n);
    error[n] = '\0';
  }
  return static_cast<int>(s.code());
}

}  // namespace tandem::client::internal

#endif  // TANDEM_CLIENT_INTERNAL_C_ERROR_H_
