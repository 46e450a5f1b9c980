#include "tests/testing/aggregator_endpoint.h"

#include <grpcpp/create_channel.h>

#include "base/grpc_status.h"

namespace tandem::testing {

AggregatorEndpoint AggregatorEndpoint::Connect(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, std::move(credentials), args);
  return {proto::AggregatorUpload::NewStub(channel), proto::AggregatorCollector::NewStub(channel)};
}

absl::Status AggregatorEndpoint::Open(const proto::RoundParameters& parameters) const {
  grpc::ClientContext ctx;
  proto::OpenRoundRequest req;
  *req.mutable_parameters() = parameters;
  proto::OpenRoundResponse resp;
  return FromGrpcStatus(collector->OpenRound(&ctx, req, &resp));
}

absl::Status AggregatorEndpoint::Upload(const proto::UploadRequest& request) const {
  grpc::ClientContext ctx;
  proto::UploadResponse resp;
  return FromGrpcStatus(upload->Upload(&ctx, request, &resp));
}

absl::StatusOr<proto::FinalizeResponse> AggregatorEndpoint::Finalize(const std::string& task_id,
                                                                     uint64_t round_id) const {
  grpc::ClientContext ctx;
  proto::FinalizeRequest req;
  req.set_task_id(task_id);
  req.set_round_id(round_id);
  proto::FinalizeResponse resp;
  if (grpc::Status s = collector->Finalize(&ctx, req, &resp); !s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<proto::AggregatorStatusResponse> AggregatorEndpoint::Status(
    const std::string& task_id) const {
  grpc::ClientContext ctx;
  proto::AggregatorStatusRequest req;
  req.set_task_id(task_id);
  proto::AggregatorStatusResponse resp;
  if (grpc::Status s = collector->Status(&ctx, req, &resp); !s.ok()) return FromGrpcStatus(s);
  return resp;
}

}  // namespace tandem::testing
