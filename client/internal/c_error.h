// Internal: status -> C ABI return code, with the message copied into the
// caller's buffer (NUL-terminated, truncated), and the exception barrier of
// every extern "C" entry point. Shared by the C ABI files.
#ifndef TANDEM_CLIENT_INTERNAL_C_ERROR_H_
#define TANDEM_CLIENT_INTERNAL_C_ERROR_H_

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::client::internal {

// Copies `message` into the caller's buffer and returns `code`. Allocates
// nothing, so it is safe in a handler for std::bad_alloc.
inline int FailRaw(absl::StatusCode code, absl::string_view message, char* error,
                   size_t error_len) noexcept {
  if (error != nullptr && error_len > 0) {
    const size_t n = std::min(message.size(), error_len - 1);
    if (n > 0) std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return static_cast<int>(code);
}

inline int Fail(const absl::Status& s, char* error, size_t error_len) noexcept {
  return FailRaw(s.code(), s.message(), error, error_len);
}

// Runs `body` (returning the entry point's code) so that no exception
// crosses into the host app: std::bad_alloc becomes RESOURCE_EXHAUSTED,
// any other exception INTERNAL, each with a message. The SDK itself reports
// errors as statuses; this barrier is for what the standard library,
// protobuf or a data source may throw.
template <typename Body>
int Guard(char* error, size_t error_len, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return FailRaw(absl::StatusCode::kResourceExhausted, "tandem: out of memory", error, error_len);
  } catch (const std::exception& e) {
    // what() is copied without allocating; the prefix goes first.
    constexpr absl::string_view kPrefix = "tandem: unexpected exception: ";
    if (error != nullptr && error_len > kPrefix.size() + 1) {
      std::memcpy(error, kPrefix.data(), kPrefix.size());
      return FailRaw(absl::StatusCode::kInternal, e.what() == nullptr ? "" : e.what(),
                     error + kPrefix.size(), error_len - kPrefix.size());
    }
    return FailRaw(absl::StatusCode::kInternal, kPrefix, error, error_len);
  } catch (...) {
    return FailRaw(absl::StatusCode::kInternal, "tandem: unexpected non-standard exception", error,
                   error_len);
  }
}

// For the entry points that return nothing: an exception is swallowed.
template <typename Body>
void GuardVoid(Body&& body) noexcept {
  try {
    body();
  } catch (...) {
  }
}

}  // namespace tandem::client::internal

#endif  // TANDEM_CLIENT_INTERNAL_C_ERROR_H_
