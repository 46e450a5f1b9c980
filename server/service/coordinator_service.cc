#include "server/service/coordinator_service.h"

#include <openssl/evp.h>

#include <algorithm>

#include "base/grpc_status.h"

namespace tandem::server {

grpc::Status CoordinatorService::CheckIn(grpc::ServerContext*, const proto::CheckInRequest* request,
                                         proto::CheckInResponse* response) {
  absl::StatusOr<proto::CheckInResponse> r = coordinator_->CheckIn(*request);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DownloadModel(grpc::ServerContext* context,
                                               const proto::DownloadModelRequest* request,
                                               grpc::ServerWriter<proto::ModelChunk>* writer) {
  absl::StatusOr<std::shared_ptr<const std::string>> blob =
      coordinator_->ModelBlob(request->task_id(), request->model_version());
  if (!blob.ok()) return ToGrpcStatus(blob.status());
  const std::string& data = **blob;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &digest_len, EVP_sha256(), nullptr) != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "SHA-256 failed");
  }
  size_t offset = 0;
  do {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    const size_t n = std::min(chunk_bytes_, data.size() - offset);
    proto::ModelChunk chunk;
    chunk.set_model_version(request->model_version());
    chunk.set_offset(offset);
    chunk.set_total_bytes(data.size());
    chunk.set_data(data.substr(offset, n));
    offset += n;
    if (offset == data.size()) chunk.set_sha256(digest, digest_len);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    coordinator_->AddBytesDown(n);
  } while (offset < data.size());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::UploadDone(grpc::ServerContext*,
                                            const proto::UploadDoneRequest* request,
                                            proto::UploadDoneResponse*) {
  return ToGrpcStatus(coordinator_->UploadDone(*request));
}

grpc::Status CoordinatorService::Status(grpc::ServerContext*,
                                        const proto::CoordinatorStatusRequest* request,
                                        proto::CoordinatorStatusResponse* response) {
  *response = coordinator_->Status();
  if (!request->task_id().empty() && request->task_id() != response->task_id()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such task here");
  }
  return grpc::Status::OK;
}

}  // namespace tandem::server
