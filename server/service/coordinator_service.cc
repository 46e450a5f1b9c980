#include "server/service/coordinator_service.h"

#include <string>

#include "base/grpc_status.h"
#include "server/service/chunked_stream.h"

namespace tandem::server {

namespace {

// "ipv4:10.1.2.3:5555" -> "ipv4:10.1.2.3", "ipv6:[::1]:5555" -> "ipv6:[::1]":
// the caller's address without its (per-connection) port.
std::string SourceAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  return colon == std::string::npos || colon == scheme ? peer : peer.substr(0, colon);
}

}  // namespace

grpc::Status CoordinatorService::CheckIn(grpc::ServerContext* context,
                                         const proto::CheckInRequest* request,
                                         proto::CheckInResponse* response) {
  absl::StatusOr<proto::CheckInResponse> r =
      tasks_->CheckIn(*request, SourceAddress(context->peer()));
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DownloadModel(grpc::ServerContext* context,
                                               const proto::DownloadModelRequest* request,
                                               grpc::ServerWriter<proto::ModelChunk>* writer) {
  absl::StatusOr<std::shared_ptr<const std::string>> blob =
      tasks_->ModelBlob(request->task_id(), request->model_version());
  if (!blob.ok()) return ToGrpcStatus(blob.status());
  return StreamChunks<proto::ModelChunk>(
      **blob, chunk_bytes_, context, writer,
      [&](proto::ModelChunk* c) { c->set_model_version(request->model_version()); },
      [&](size_t n) { tasks_->AddBytesDown(request->task_id(), n); });
}

grpc::Status CoordinatorService::UploadDone(grpc::ServerContext*,
                                            const proto::UploadDoneRequest* request,
                                            proto::UploadDoneResponse*) {
  return ToGrpcStatus(tasks_->UploadDone(*request));
}

grpc::Status CoordinatorService::Status(grpc::ServerContext*,
                                        const proto::CoordinatorStatusRequest* request,
                                        proto::CoordinatorStatusResponse* response) {
  grpc::Status s = FullStatus(*tasks_, *request, response);
  if (s.ok()) RedactForPublic(response);
  return s;
}

grpc::Status FullStatus(TaskHost& tasks, const proto::CoordinatorStatusRequest& request,
                        proto::CoordinatorStatusResponse* response) {
  absl::StatusOr<proto::CoordinatorStatusResponse> s = tasks.Status(request.task_id());
  if (!s.ok()) return ToGrpcStatus(s.status());
  *response = *std::move(s);
  return grpc::Status::OK;
}

void RedactForPublic(proto::CoordinatorStatusResponse* status) {
  // How full the open round is tells an outsider how many slots a flood
  // would have to take, and when a device it watches was assigned; the
  // worker's address and errors map the deployment. Released figures
  // (history, epsilon, accuracy) stay public.
  status->clear_assigned();
  status->clear_uploads_done();
  if (status->has_worker()) {
    status->mutable_worker()->clear_address();
    status->mutable_worker()->clear_last_error();
  }
  for (proto::RoundSummary& r : *status->mutable_history()) {
    if (!r.evaluated_by().empty() && r.evaluated_by() != "coordinator")
      r.set_evaluated_by("worker");
  }
}

}  // namespace tandem::server
