// gRPC credentials from a TlsConfig (TLS and mutual TLS between all tandem
// parties; plaintext only when insecure_plaintext is set explicitly).
#ifndef TANDEM_AGGREGATOR_SERVICE_CREDENTIALS_H_
#define TANDEM_AGGREGATOR_SERVICE_CREDENTIALS_H_

#include <memory>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace tandem::service {

// INVALID_ARGUMENT when TLS is requested without certificate/key paths (or
// mutual TLS without roots); NOT_FOUND / PERMISSION_DENIED when a PEM file
// cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const proto::TlsConfig& tls);
// Client side: verifies the server against root_ca_path and presents this
// daemon's certificate when cert_chain_path is set (mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const proto::TlsConfig& tls);

}  // namespace tandem::service

#endif  // TANDEM_AGGREGATOR_SERVICE_CREDENTIALS_H_
