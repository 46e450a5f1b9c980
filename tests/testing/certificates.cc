#include "tests/testing/certificates.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tandem::testing {

absl::Status MakeTestCertificates(const std::string& dir) {
  std::ofstream(dir + "/ext.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  << "extendedKeyUsage=serverAuth,clientAuth\n";
  const std::string cmd = absl::StrCat(
      "cd ", dir, " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes",
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=tandem-test-ca 2>/dev/null",
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes",
      " -keyout party.key -out party.csr -subj /CN=localhost 2>/dev/null",
      " && openssl x509 -req -in party.csr -CA ca.pem -CAkey ca.key -CAcreateserial",
      " -out party.pem -days 1 -extfile ext.cnf 2>/dev/null");
  if (std::system(cmd.c_str()) != 0) return absl::InternalError("openssl failed: " + cmd);
  return absl::OkStatus();
}

}  // namespace tandem::testing
