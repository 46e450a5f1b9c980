#include "tests/testing/certificates.h"

#include <cstdlib>
#include <filesystem>
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

absl::Status MakeRoleCertificates(const std::string& dir) {
  auto run = [](const std::string& cmd) -> absl::Status {
    if (std::system(cmd.c_str()) != 0) return absl::InternalError("openssl failed: " + cmd);
    return absl::OkStatus();
  };
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const char* ca : {"ca", "rogue-ca"}) {
    absl::Status s = run(absl::StrCat("cd ", dir, " && openssl req -x509", ec, " -keyout ", ca,
                                      ".key -out ", ca, ".pem -days 2 -subj /CN=", ca,
                                      " 2>/dev/null"));
    if (!s.ok()) return s;
  }
  struct Party {
    const char* file;
    const char* name;
    const char* ca;
    const char* more_sans = "";
  };
  // The smuggler: a certificate of the right CA whose only DNS name is its
  // own, with the roles' names in SAN types name constraints do not bind
  // (email, URI) and as its CN.
  const char* smuggled =
      ",email:coordinator.tandem,email:leader.tandem,email:operator.tandem,"
      "URI:coordinator.tandem,URI:leader.tandem,URI:operator.tandem";
  for (const Party& p :
       {Party{"leader", "leader.tandem", "ca"}, Party{"helper", "helper.tandem", "ca"},
        Party{"coordinator", "coordinator.tandem", "ca"}, Party{"outsider", "mallory.tandem", "ca"},
        Party{"operator", "operator.tandem", "ca"}, Party{"worker", "worker.tandem", "ca"},
        Party{"rogue", "coordinator.tandem", "rogue-ca"},
        Party{"leader-operator", "operator.leader.tandem", "ca"},
        Party{"helper-operator", "operator.helper.tandem", "ca"},
        Party{"smuggler", "coordinator.tandem", "ca", smuggled}}) {
    const std::string first_dns =
        std::string(p.file) == "smuggler" ? "smuggler.tandem" : std::string(p.name);
    std::ofstream(absl::StrCat(dir, "/", p.file, ".cnf"))
        << "subjectAltName=DNS:" << first_dns << ",DNS:localhost,IP:127.0.0.1" << p.more_sans
        << "\n"
        << "extendedKeyUsage=serverAuth,clientAuth\n";
    absl::Status s = run(absl::StrCat(
        "cd ", dir, " && openssl req", ec, " -keyout ", p.file, ".key -out ", p.file,
        ".csr -subj /CN=", p.name, " 2>/dev/null && openssl x509 -req -in ", p.file, ".csr -CA ",
        p.ca, ".pem -CAkey ", p.ca, ".key -CAcreateserial -out ", p.file, ".pem -days 2 -extfile ",
        p.file, ".cnf 2>/dev/null"));
    if (!s.ok()) return s;
  }
  for (const char* key : {"ticket", "other_ticket"}) {
    absl::Status s = run(absl::StrCat("cd ", dir, " && openssl genpkey -algorithm ed25519 -out ",
                                      key, ".key 2>/dev/null && openssl pkey -in ", key,
                                      ".key -pubout -out ", key, ".pub 2>/dev/null"));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReissueCertificate(const std::string& dir, const std::string& party,
                                const std::string& name, const std::string& ca) {
  const std::string cmd = absl::StrCat(
      "cd ", dir, " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes",
      " -keyout ", party, ".new.key -out ", party, ".new.csr -subj /CN=", name,
      " 2>/dev/null && openssl x509 -req -in ", party, ".new.csr -CA ", ca, ".pem -CAkey ", ca,
      ".key -CAcreateserial -out ", party, ".new.pem -days 2 -extfile ", party,
      ".cnf 2>/dev/null && mv ", party, ".new.key ", party, ".key && mv ", party, ".new.pem ",
      party, ".pem");
  if (std::system(cmd.c_str()) != 0) return absl::InternalError("openssl failed: " + cmd);
  return absl::OkStatus();
}

std::string RootsFile(const std::string& certs_dir, const std::string& party) {
  const std::string bundle = certs_dir + "/" + party + "-roots.pem";
  std::error_code ec;
  return std::filesystem::exists(bundle, ec) ? bundle : certs_dir + "/ca.pem";
}

}  // namespace tandem::testing
