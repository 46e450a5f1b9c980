// Test-only: a CA and one certificate for every party (server and client
// auth, SAN IP:127.0.0.1 and DNS:localhost), made with the openssl command
// line tool into `dir`: ca.pem, ca.key, party.pem, party.key.
#ifndef TANDEM_TESTS_TESTING_CERTIFICATES_H_
#define TANDEM_TESTS_TESTING_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace tandem::testing {

// INTERNAL when openssl fails.
absl::Status MakeTestCertificates(const std::string& dir);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_CERTIFICATES_H_
