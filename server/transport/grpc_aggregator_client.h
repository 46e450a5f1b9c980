// AggregatorClient over the AggregatorCollector gRPC service, and the
// channel to an aggregator's collector listener.
#ifndef TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_
#define TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/grpc_credentials.h"
#include "base/grpc_policy.h"
#include "proto/aggregator.grpc.pb.h"
#include "server/core/aggregator_client.h"

namespace tandem::server {

// The channel to one aggregator's collector listener (mutual TLS):
// presents this coordinator's certificate (tls.cert_chain_path and
// tls.private_key_path, both required), verifies the server against
// tls.root_ca_path and pins it to `server_name`: the server's certificate
// must name it (DNS SAN), whatever host `address` names, so that the other
// aggregator, which holds a certificate of the same CA, cannot stand in for
// it. With tls.insecure_plaintext, a plaintext channel (server_name unused).
// INVALID_ARGUMENT for an empty address, a missing certificate/key or an
// empty server_name with TLS; NOT_FOUND / INVALID_ARGUMENT for PEM files
// that cannot be read (base/grpc_credentials.h).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCollectorChannel(
    const std::string& address, const TlsFiles& tls, const std::string& server_name);

// Thread-safe. Finalize can take long (the leader's last verification pass),
// hence the generous default deadline.
class GrpcAggregatorClient : public AggregatorClient {
 public:
  explicit GrpcAggregatorClient(std::shared_ptr<grpc::Channel> channel,
                                absl::Duration deadline = rpc::kCollectorCallDeadline);
  absl::StatusOr<proto::OpenRoundResponse> OpenRound(
      const proto::RoundParameters& parameters) override;
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest& request) override;
  absl::Status AbandonRound(const std::string& task_id, uint64_t round_id) override;
  // The collector's Status (not part of AggregatorClient: the round driver
  // does not need it; tools and tests do).
  absl::StatusOr<proto::AggregatorStatusResponse> Status(const std::string& task_id);

 private:
  std::unique_ptr<proto::AggregatorCollector::Stub> stub_;
  absl::Duration deadline_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_
