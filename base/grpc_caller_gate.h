// Who may call a daemon's internal listeners (ARCHITECTURE.md, trust
// model): the aggregators' collector API only the coordinator's identity, the peer
// API only the leader's, the coordinator's admin API only operators'. An
// identity is a DNS SAN of the caller's verified TLS client certificate
// (never an email, URI or IP SAN: name constraints bind DNS names only), or
// its subject CN when it has no SAN of any type (the properties gRPC's SSL
// transport puts in the AuthContext). The certificate chain
// itself was verified by the TLS handshake against the listener's roots;
// the gate only decides which of the CA's certificates may call.
//
// Thread safety: CallerGate is immutable after construction; RefusalCounters
// is internally synchronised. Neither owns the other: the daemon owns both.
#ifndef TANDEM_BASE_GRPC_CALLER_GATE_H_
#define TANDEM_BASE_GRPC_CALLER_GATE_H_

#include <grpcpp/security/auth_context.h>
#include <grpcpp/server_context.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tandem {

// Calls refused by a daemon, by "listener/reason" (e.g. "collector/identity",
// "upload/ticket"), since it started.
class RefusalCounters {
 public:
  void Add(const std::string& key);
  std::map<std::string, uint64_t> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// The identities of an authenticated peer: its DNS SANs, else (no SAN of
// any type) its CN.
// Empty for a plaintext or certificate-less peer.
std::vector<std::string> PeerIdentities(const grpc::AuthContext& context);

class CallerGate {
 public:
  // `listener` names the port in refusals ("collector", "peer"). With
  // `enforce` false (plaintext on loopback, an explicit opt-in) every
  // caller is admitted: there is no identity to check.
  CallerGate(std::string listener, std::vector<std::string> allowed, bool enforce,
             RefusalCounters* counters);

  // OK, or PERMISSION_DENIED (counted) naming the caller's identities.
  grpc::Status Admit(const grpc::ServerContext& context) const;

 private:
  const std::string listener_;
  const std::vector<std::string> allowed_;
  const bool enforce_;
  RefusalCounters* const counters_;
};

}  // namespace tandem

#endif  // TANDEM_BASE_GRPC_CALLER_GATE_H_
