#include "server/service/task_admin_service.h"

#include <fstream>
#include <string>

#include "base/grpc_status.h"
#include "server/service/admin_service.h"
#include "server/service/chunked_stream.h"

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
  return StreamChunks<proto::ModelFileChunk>(
      data, kChunkBytes, context, writer,
      [&](proto::ModelFileChunk* c) { c->set_version(file->first); }, [](size_t) {});
}

}  // namespace tandem::server
