// AggregatorClient over the AggregatorCollector gRPC service.
#ifndef TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_
#define TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_

#include <memory>

#include <grpcpp/channel.h>

#include "absl/time/time.h"
#include "proto/aggregator.grpc.pb.h"
#include "server/core/aggregator_client.h"

namespace tandem::server {

// Thread-safe. Finalize can take long (the leader's last verification pass),
// hence the generous default deadline.
class GrpcAggregatorClient : public AggregatorClient {
 public:
  explicit GrpcAggregatorClient(std::shared_ptr<grpc::Channel> channel,
                                absl::Duration deadline = absl::Seconds(120));
  absl::Status OpenRound(const proto::RoundParameters& parameters) override;
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest& request) override;

 private:
  std::unique_ptr<proto::AggregatorCollector::Stub> stub_;
  absl::Duration deadline_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TRANSPORT_GRPC_AGGREGATOR_CLIENT_H_
