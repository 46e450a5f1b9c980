#include "server/service/task_admin_service.h"

#include <openssl/evp.h>

#include <fstream>
#include <string>

#include "base/grpc_status.h"
#include "server/service/admin_service.h"

namespace tandem::server {
namespace {

grpc::Status Reply(absl::StatusOr<proto::TaskInfo> info, proto::TaskInfo* response) {
  if (!info.ok()) return ToGrpcStatus(info.status());
  *response = *std::move(info);
  return grpc::Status::OK;
}

constexpr size_t kChunkBytes = size_t{1} << 20;

}  // namespace

grpc::Status TaskAdminService::CreateTask(grpc::ServerContext* context,
                                          const proto::CreateTaskRequest* request,
                                          proto::TaskInfo* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(tasks_->CreateTask(*request, OperatorOf(*context)), response);
}

grpc::Status TaskAdminService::ListTasks(grpc::ServerContext* context,
                                         const proto::ListTasksRequest*,
                                         proto::ListTasksResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  for (proto::TaskInfo& t : tasks_->List()) *response->add_tasks() = std::move(t);
  return grpc::Status::OK;
}

grpc::Status TaskAdminService::GetTask(grpc::ServerContext* context,
                                       const proto::TaskRequest* request,
                                       proto::TaskInfo* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(tasks_->Get(request->task_id()), response);
}

grpc::Status TaskAdminService::PauseTask(grpc::ServerContext* context,
                                         const proto::TaskRequest* request,
                                         proto::TaskInfo* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(tasks_->Pause(request->task_id(), OperatorOf(*context)), response);
}

grpc::Status TaskAdminService::ResumeTask(grpc::ServerContext* context,
                                          const proto::TaskRequest* request,
                                          proto::TaskInfo* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(tasks_->Resume(request->task_id(), OperatorOf(*context)), response);
}

grpc::Status TaskAdminService::DeleteTask(grpc::ServerContext* context,
                                          const proto::TaskRequest* request,
                                          proto::TaskInfo* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return Reply(tasks_->Delete(request->task_id(), OperatorOf(*context)), response);
}

grpc::Status TaskAdminService::ExportModel(grpc::ServerContext* context,
                                           const proto::ExportModelRequest* request,
                                           grpc::ServerWriter<proto::ModelFileChunk>* writer) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  absl::StatusOr<std::pair<uint64_t, std::string>> file =
      tasks_->ExportPath(request->task_id(), request->version());
  if (!file.ok()) return ToGrpcStatus(file.status());
  std::ifstream in(file->second, std::ios::binary);
  if (!in) return grpc::Status(grpc::StatusCode::NOT_FOUND, "the released model file is gone");
  const std::string data(std::istreambuf_iterator<char>(in), {});
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &digest_len, EVP_sha256(), nullptr) != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "SHA-256 failed");
  }
  size_t offset = 0;
  do {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    const size_t n = std::min(kChunkBytes, data.size() - offset);
    proto::ModelFileChunk chunk;
    chunk.set_version(file->first);
    chunk.set_offset(offset);
    chunk.set_total_bytes(data.size());
    chunk.set_data(data.substr(offset, n));
    offset += n;
    if (offset == data.size()) chunk.set_sha256(digest, digest_len);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  } while (offset < data.size());
  return grpc::Status::OK;
}

}  // namespace tandem::server
