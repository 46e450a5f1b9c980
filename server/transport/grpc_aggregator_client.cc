#include "server/transport/grpc_aggregator_client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include "base/grpc_policy.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"

namespace tandem::server {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCollectorChannel(
    const std::string& address, const TlsFiles& tls, const std::string& server_name) {
  if (address.empty()) return absl::InvalidArgumentError("aggregator address is empty");
  grpc::ChannelArguments args = rpc::ChannelArgs();
  args.SetMaxReceiveMessageSize(64 << 20);  // released shares: 8 bytes x D
  if (!tls.insecure_plaintext) {
    if (tls.cert_chain_path.empty() || tls.private_key_path.empty()) {
      return absl::InvalidArgumentError(
          "the collector listeners need mutual TLS: the coordinator's certificate and key "
          "(--tls_cert, --tls_key) are required");
    }
    if (server_name.empty()) {
      return absl::InvalidArgumentError(
          "the aggregator's TLS identity (--leader_name / --helper_name) is required with TLS");
    }
    args.SetSslTargetNameOverride(server_name);
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                          MakeChannelCredentials(tls));
  return grpc::CreateCustomChannel(address, creds, args);
}

GrpcAggregatorClient::GrpcAggregatorClient(std::shared_ptr<grpc::Channel> channel,
                                           absl::Duration deadline)
    : stub_(proto::AggregatorCollector::NewStub(std::move(channel))), deadline_(deadline) {}

absl::StatusOr<proto::OpenRoundResponse> GrpcAggregatorClient::OpenRound(
    const proto::RoundParameters& parameters) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::OpenRoundRequest req;
  *req.mutable_parameters() = parameters;
  proto::OpenRoundResponse resp;
  TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub_->OpenRound(&ctx, req, &resp)));
  return resp;
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

absl::Status GrpcAggregatorClient::AbandonRound(const std::string& task_id, uint64_t round_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::AbandonRoundRequest req;
  req.set_task_id(task_id);
  req.set_round_id(round_id);
  proto::AbandonRoundResponse resp;
  return FromGrpcStatus(stub_->AbandonRound(&ctx, req, &resp));
}

absl::StatusOr<proto::AggregatorStatusResponse> GrpcAggregatorClient::Status(
    const std::string& task_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  proto::AggregatorStatusRequest req;
  req.set_task_id(task_id);
  proto::AggregatorStatusResponse resp;
  const grpc::Status s = stub_->Status(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

}  // namespace tandem::server
