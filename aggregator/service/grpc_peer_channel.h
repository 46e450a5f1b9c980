// PeerChannel over the AggregatorPeer gRPC service (leader -> helper).
#ifndef TANDEM_AGGREGATOR_SERVICE_GRPC_PEER_CHANNEL_H_
#define TANDEM_AGGREGATOR_SERVICE_GRPC_PEER_CHANNEL_H_

#include <memory>

#include <grpcpp/channel.h>

#include "absl/time/time.h"
#include "aggregator/core/peer_channel.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::aggregator {

// Thread-safe (gRPC stubs are). Each call carries `deadline`.
class GrpcPeerChannel : public PeerChannel {
 public:
  GrpcPeerChannel(std::shared_ptr<grpc::Channel> channel, absl::Duration deadline);
  absl::StatusOr<proto::VerifyResponse> Verify(const proto::VerifyRequest& request) override;
  absl::StatusOr<proto::AcceptedSetAck> CommitAcceptedSet(
      const proto::AcceptedSet& request) override;

 private:
  std::unique_ptr<proto::AggregatorPeer::Stub> stub_;
  absl::Duration deadline_;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_GRPC_PEER_CHANNEL_H_
