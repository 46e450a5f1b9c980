#include "aggregator/service/grpc_services.h"

#include "base/grpc_status.h"

namespace tandem::aggregator {
namespace {

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status UploadService::Upload(grpc::ServerContext*, const proto::UploadRequest* request,
                                   proto::UploadResponse* response) {
  return Reply(aggregator_->Upload(*request), response);
}

grpc::Status PeerService::Verify(grpc::ServerContext*, const proto::VerifyRequest* request,
                                 proto::VerifyResponse* response) {
  return Reply(aggregator_->HandleVerify(*request), response);
}

grpc::Status PeerService::CommitAcceptedSet(grpc::ServerContext*,
                                            const proto::AcceptedSet* request,
                                            proto::AcceptedSetAck* response) {
  return Reply(aggregator_->HandleCommit(*request), response);
}

grpc::Status CollectorService::OpenRound(grpc::ServerContext*,
                                         const proto::OpenRoundRequest* request,
                                         proto::OpenRoundResponse*) {
  return ToGrpcStatus(aggregator_->OpenRound(request->parameters()));
}

grpc::Status CollectorService::Finalize(grpc::ServerContext*,
                                        const proto::FinalizeRequest* request,
                                        proto::FinalizeResponse* response) {
  return Reply(aggregator_->Finalize(*request), response);
}

grpc::Status CollectorService::Status(grpc::ServerContext*,
                                      const proto::AggregatorStatusRequest* request,
                                      proto::AggregatorStatusResponse* response) {
  return Reply(aggregator_->Status(*request), response);
}

}  // namespace tandem::aggregator
