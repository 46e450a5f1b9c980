#include "base/net_address.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace tandem {

absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || address.find(':') != colon) return address;
  return address.substr(0, colon);
}

bool IsLoopbackAddress(absl::string_view address) {
  const absl::string_view host = HostOf(address);
  return absl::EqualsIgnoreCase(host, "localhost") || host == "::1" ||
         absl::StartsWith(host, "127.");
}

}  // namespace tandem
