#include "server/transport/grpc_aggregator_client.h"

#include <grpcpp/client_context.h>

#include "base/grpc_status.h"

namespace tandem::server {

GrpcAggregatorClient::GrpcAggregatorClient(std::shared_ptr<grpc::Channel> channel,
                                           absl::Duration deadline)
    : stub_(proto::AggregatorCollector::NewStub(std::move(channel))), deadline_(deadline) {}

absl::Status GrpcAggregatorClient::OpenRound(const proto::RoundParameters& parameters) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::OpenRoundRequest req;
  *req.mutable_parameters() = parameters;
  proto::OpenRoundResponse resp;
  return FromGrpcStatus(stub_->OpenRound(&ctx, req, &resp));
}

absl::StatusOr<proto::FinalizeResponse> GrpcAggregatorClient::Finalize(
    const proto::FinalizeRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::FinalizeResponse resp;
  const grpc::Status s = stub_->Finalize(&ctx, request, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

}  // namespace tandem::server
