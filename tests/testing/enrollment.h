// Device enrollment for tests and simulations that start a real
// tandem-coordinator (server/core/device_registry.h): an operator
// enrollment key in a directory and single-use enrollment tokens minted with
// it, as `tandem-admin keygen` and `tandem-admin token mint` make them.
// Test-only (and tandem-sim's process mode).
#ifndef TANDEM_TESTS_TESTING_ENROLLMENT_H_
#define TANDEM_TESTS_TESTING_ENROLLMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::testing {

// Creates `dir`/enroll.key (PKCS#8 PEM, 0600) and `dir`/enroll.pub (what
// the coordinator's --enrollment_keys takes) unless they exist; returns the
// public key's path.
absl::StatusOr<std::string> EnsureEnrollmentKey(const std::string& dir);

// A fresh single-use token (text form) signed with `dir`/enroll.key, valid
// for a day, for any one device.
absl::StatusOr<std::string> MintEnrollmentToken(const std::string& dir);

// MintEnrollmentToken written to `path` (what tandem-client's
// --enrollment_token_file reads); returns `path`.
absl::StatusOr<std::string> WriteEnrollmentToken(const std::string& dir, const std::string& path);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_ENROLLMENT_H_
