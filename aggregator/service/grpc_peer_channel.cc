#include "aggregator/service/grpc_peer_channel.h"

#include <grpcpp/client_context.h>

#include "base/grpc_status.h"

namespace tandem::aggregator {

GrpcPeerChannel::GrpcPeerChannel(std::shared_ptr<grpc::Channel> channel, absl::Duration deadline)
    : stub_(proto::AggregatorPeer::NewStub(std::move(channel))), deadline_(deadline) {}

absl::StatusOr<proto::VerifyResponse> GrpcPeerChannel::Verify(
    const proto::VerifyRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::VerifyResponse response;
  const grpc::Status s = stub_->Verify(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<proto::AcceptedSetAck> GrpcPeerChannel::CommitAcceptedSet(
    const proto::AcceptedSet& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::AcceptedSetAck response;
  const grpc::Status s = stub_->CommitAcceptedSet(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

}  // namespace tandem::aggregator
