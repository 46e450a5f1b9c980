// gRPC credentials from PEM files (TLS and mutual TLS between all tandem
// parties; plaintext only when insecure_plaintext is set explicitly). Used by
// every daemon and client transport; the daemons fill TlsFiles from their
// proto TlsConfig (proto/config.proto).
//
// Daemons also set TlsFiles::reloader: their listeners and outgoing channels
// then take certificates, keys and roots from a TlsReloader, which re-reads
// the files on SIGHUP (issue 34 item 7) without dropping a listener.
#ifndef TANDEM_BASE_GRPC_CREDENTIALS_H_
#define TANDEM_BASE_GRPC_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

class TlsReloader;

struct TlsFiles {
  bool insecure_plaintext = false;  // explicit opt-in for local runs
  std::string cert_chain_path;      // PEM certificate chain of this party
  std::string private_key_path;     // PEM private key of this party
  std::string root_ca_path;         // PEM roots used to verify peers
  bool require_client_cert = false; // server side: mutual TLS
  // Not owned; when set (daemons), credentials come from it and follow its
  // Reload(). It must outlive every server and channel built from them.
  TlsReloader* reloader = nullptr;
};

// Plaintext transport (local runs and loopback defaults).
inline TlsFiles PlaintextTls() {
  TlsFiles tls;
  tls.insecure_plaintext = true;
  return tls;
}

// INVALID_ARGUMENT when TLS is requested without certificate/key paths (or
// mutual TLS without roots), or (with a reloader) when the files fail
// ValidateTlsMaterial; NOT_FOUND when a PEM file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls);
// Client side: verifies the server against root_ca_path and presents this
// daemon's certificate when cert_chain_path is set (mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& tls);

// What a daemon checks before it serves a certificate: the chain parses
// (the first certificate is this party's), the key parses and is the
// leaf's, the leaf is valid at `now`, and `roots` (when not empty) hold at
// least one certificate. INVALID_ARGUMENT naming the problem otherwise.
absl::Status ValidateTlsMaterial(const std::string& cert_chain_pem,
                                 const std::string& private_key_pem, const std::string& roots_pem,
                                 absl::Time now);

// Certificates, keys and roots a daemon re-reads on SIGHUP: an operator
// replaces the PEM files in place (a renewed make-certs.sh run,
// cert-manager, certbot) and signals the daemon; new TLS handshakes then use
// the new identity and roots, on every listener and outgoing channel, and
// connections already open keep theirs until they end (the daemons bound
// connection age).
//
// How: each distinct (chain, key, roots) file set is copied into two
// anonymous in-memory files (memfd_create: the copies never reach a disk and
// die with the process) that gRPC FileWatcherCertificateProviders (one per
// credentials object) read through /proc/self/fd once a second. Reload() reads the configured
// paths, validates the set (ValidateTlsMaterial) and only then swaps the memfds in with dup2, which
// a reader sees atomically; the key and its chain share one file, so a reader never pairs a new key
// with an old chain. A set that fails keeps serving what it had. New material is in use within
// about a second of Reload() returning.
//
// Thread safety: every method is thread-safe. Ownership: owns the memfds;
// outlive every server and channel built from its credentials.
class TlsReloader {
 public:
  TlsReloader();
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;
  ~TlsReloader();

  // Credentials that follow Reload(). Errors as MakeServerCredentials.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsFiles& tls);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(const TlsFiles& tls);

  // Re-reads and publishes every file set. OK when all were published;
  // otherwise the first error (each is logged), and the sets that failed
  // keep their previous material.
  absl::Status Reload();

  struct Stats {
    uint64_t reloaded = 0;  // sets published by Reload()
    uint64_t failed = 0;    // sets Reload() refused
    size_t sets = 0;        // distinct file sets
  };
  Stats stats() const;

 private:
  struct Set;
  using Key = std::tuple<std::string, std::string, std::string>;  // chain, key, roots
  absl::StatusOr<Set*> SetFor(const TlsFiles& tls) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<Key, std::unique_ptr<Set>> sets_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_BASE_GRPC_CREDENTIALS_H_
