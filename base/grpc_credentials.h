// gRPC credentials from PEM files (TLS and mutual TLS between all tandem
// parties; plaintext only when insecure_plaintext is set explicitly). Used by
// every daemon and client transport; the daemons fill TlsFiles from their
// proto TlsConfig (proto/config.proto).
#ifndef TANDEM_BASE_GRPC_CREDENTIALS_H_
#define TANDEM_BASE_GRPC_CREDENTIALS_H_

#include <memory>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <string>

#include "absl/status/statusor.h"

namespace tandem {

struct TlsFiles {
  bool insecure_plaintext = false;  // explicit opt-in for local runs
  std::string cert_chain_path;      // PEM certificate chain of this party
  std::string private_key_path;     // PEM private key of this party
  std::string root_ca_path;         // PEM roots used to verify peers
  bool require_client_cert = false; // server side: mutual TLS
};

// INVALID_ARGUMENT when TLS is requested without certificate/key paths (or
// mutual TLS without roots); NOT_FOUND / PERMISSION_DENIED when a PEM file
// cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls);
// Client side: verifies the server against root_ca_path and presents this
// daemon's certificate when cert_chain_path is set (mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& tls);

}  // namespace tandem

#endif  // TANDEM_BASE_GRPC_CREDENTIALS_H_
