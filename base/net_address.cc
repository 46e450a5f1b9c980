#include "base/net_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

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
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  // Parsed, not matched by prefix: "127.evil.example" is a DNS name that
  // may resolve anywhere.
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;  // 127.0.0.0/8
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z, an IPv4-mapped loopback address.
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace tandem
