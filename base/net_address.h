// host:port helpers shared by the daemons' configuration checks.
// Pure functions; thread-safe.
#ifndef TANDEM_BASE_NET_ADDRESS_H_
#define TANDEM_BASE_NET_ADDRESS_H_

#include "absl/strings/string_view.h"

namespace tandem {

// The host part of "host:port" ("[::1]:7001" -> "::1"; no port: all of it).
absl::string_view HostOf(absl::string_view address);

// True for 127.0.0.0/8, ::1 and localhost (the only places plaintext may
// listen or connect to); false for wildcard addresses (0.0.0.0, ::) and
// every other host.
bool IsLoopbackAddress(absl::string_view address);

}  // namespace tandem

#endif  // TANDEM_BASE_NET_ADDRESS_H_
