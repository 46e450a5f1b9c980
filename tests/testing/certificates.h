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

// One CA (ca.pem, ca.key) and a certificate per role, each with SAN
// DNS:<role>.tandem, DNS:localhost, IP:127.0.0.1 (server and client auth):
// leader, helper, coordinator, and outsider (DNS:mallory.tandem, the same
// CA: a party with a valid certificate but no role), operator
// (DNS:operator.tandem, the coordinator's operator) and worker
// (DNS:worker.tandem, a tandem-worker), smuggler (CN coordinator.tandem,
// DNS:smuggler.tandem, and the coordinator's, leader's and operator's names
// as email and URI SANs: identities only in SAN types no name constraint
// binds), leader-operator and helper-operator (DNS:operator.<role>.tandem,
// each aggregator's own operator). Also another CA's
// certificate for the coordinator's name (rogue-ca.pem, rogue.{pem,key}),
// and the coordinator's Ed25519 ticket key (ticket.key, ticket.pub) and a
// second one (other_ticket.key, other_ticket.pub). Files <name>.pem/.key.
absl::Status MakeRoleCertificates(const std::string& dir);

// A new key and certificate for `party` of MakeRoleCertificates (subject
// CN `name`, the same SANs, issued by `ca`), written over <party>.pem and
// <party>.key: a certificate renewal. INTERNAL when openssl fails.
absl::Status ReissueCertificate(const std::string& dir, const std::string& party,
                                const std::string& name, const std::string& ca = "ca");

// The roots `party` verifies its peers with in `certs_dir`: the per-party
// bundle <party>-roots.pem of deploy/make-certs.sh when present, else the
// single ca.pem of MakeRoleCertificates.
std::string RootsFile(const std::string& certs_dir, const std::string& party);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_CERTIFICATES_H_
