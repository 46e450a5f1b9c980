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

grpc::Status UploadService::StreamedUpload(
    grpc::ServerContext*,
    grpc::ServerUnaryStreamer<proto::UploadRequest, proto::UploadResponse>* stream) {
  auto [arena, request] = Aggregator::NewArenaUpload();
  if (!stream->Read(request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the upload request does not parse");
  }
  absl::StatusOr<proto::UploadResponse> result = aggregator_->Upload(request, arena);
  if (absl::IsUnauthenticated(result.status())) counters_->Add("upload/ticket");
  metrics_->CountUpload(result.status().code());
  if (!result.ok()) return ToGrpcStatus(result.status());
  metrics_->NoteTask(request->task_id());  // its ticket named the task
  if (!stream->Write(*result)) return grpc::Status(grpc::StatusCode::CANCELLED, "call ended");
  return grpc::Status::OK;
}

grpc::Status PeerService::Verify(grpc::ServerContext* context, const proto::VerifyRequest* request,
                                 proto::VerifyResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  const absl::Time start = absl::Now();
  absl::StatusOr<proto::VerifyResponse> result = aggregator_->HandleVerify(*request);
  metrics_->ObserveBatchSeconds(/*local=*/true, absl::Now() - start);
  metrics_->CountVerifyBatch(result.status().code(), request->checks_size());
  return Reply(std::move(result), response);
}

grpc::Status PeerService::CommitAcceptedSet(grpc::ServerContext* context,
                                            const proto::AcceptedSet* request,
                                            proto::AcceptedSetAck* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(aggregator_->HandleCommit(*request), response);
}

grpc::Status CollectorService::OpenRound(grpc::ServerContext* context,
                                         const proto::OpenRoundRequest* request,
                                         proto::OpenRoundResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  const std::string& task_id = request->parameters().task_id();
  if (!aggregator_->Provisioned(task_id)) {
    // Refused by OpenRound below, before anything is created; not a task
    // of this server's metrics either.
    counters_->Add("collector/unprovisioned");
  } else {
    metrics_->NoteTask(task_id);
  }
  const absl::Status s = aggregator_->OpenRound(request->parameters());
  if (s.ok()) {
    response->set_now_unix_ms(absl::ToUnixMillis(aggregator_->Now()));
    response->set_max_clock_skew_ms(absl::ToInt64Milliseconds(aggregator_->max_clock_skew()));
  }
  return ToGrpcStatus(s);
}

grpc::Status CollectorService::Finalize(grpc::ServerContext* context,
                                        const proto::FinalizeRequest* request,
                                        proto::FinalizeResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  metrics_->NoteTask(request->task_id());
  return Reply(aggregator_->Finalize(*request), response);
}

grpc::Status CollectorService::Status(grpc::ServerContext* context,
                                      const proto::AggregatorStatusRequest* request,
                                      proto::AggregatorStatusResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  metrics_->NoteTask(request->task_id());
  grpc::Status s = Reply(aggregator_->Status(*request), response);
  if (s.ok()) {
    for (const auto& [key, n] : counters_->Snapshot()) (*response->mutable_refused_calls())[key] = n;
  }
  return s;
}

grpc::Status CollectorService::AbandonRound(grpc::ServerContext* context,
                                            const proto::AbandonRoundRequest* request,
                                            proto::AbandonRoundResponse*) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  metrics_->NoteTask(request->task_id());
  return ToGrpcStatus(aggregator_->AbandonRound(request->task_id(), request->round_id()));
}

}  // namespace tandem::aggregator
