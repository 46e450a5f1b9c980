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
  absl::StatusOr<proto::UploadResponse> result = aggregator_->Upload(*request);
  if (absl::IsUnauthenticated(result.status())) counters_->Add("upload/ticket");
  return Reply(std::move(result), response);
}

grpc::Status PeerService::Verify(grpc::ServerContext* context, const proto::VerifyRequest* request,
                                 proto::VerifyResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(aggregator_->HandleVerify(*request), response);
}

grpc::Status PeerService::CommitAcceptedSet(grpc::ServerContext* context,
                                            const proto::AcceptedSet* request,
                                            proto::AcceptedSetAck* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(aggregator_->HandleCommit(*request), response);
}

grpc::Status CollectorService::OpenRound(grpc::ServerContext* context,
                                         const proto::OpenRoundRequest* request,
                                         proto::OpenRoundResponse*) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return ToGrpcStatus(aggregator_->OpenRound(request->parameters()));
}

grpc::Status CollectorService::Finalize(grpc::ServerContext* context,
                                        const proto::FinalizeRequest* request,
                                        proto::FinalizeResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(aggregator_->Finalize(*request), response);
}

grpc::Status CollectorService::Status(grpc::ServerContext* context,
                                      const proto::AggregatorStatusRequest* request,
                                      proto::AggregatorStatusResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  grpc::Status s = Reply(aggregator_->Status(*request), response);
  if (s.ok()) {
    for (const auto& [key, n] : counters_->Snapshot()) (*response->mutable_refused_calls())[key] = n;
  }
  return s;
}

}  // namespace tandem::aggregator
