// gRPC adapter of the coordinator's task API (proto/task_admin.proto
// TaskAdmin) over the task host (server/core/task_host.h). Served on the
// admin listener beside CoordinatorAdmin: mutual TLS, and every call must
// pass the same gate (operator identities; PERMISSION_DENIED, counted as
// "admin/identity", otherwise) before its request is looked at. The
// operator's identity is recorded with every change.
// ExportModel streams the released safetensors file in chunks of at most
// 1 MiB; the last carries its SHA-256.
// Thread-safe (the host is). Owns neither the host nor the gate.
#ifndef TANDEM_SERVER_SERVICE_TASK_ADMIN_SERVICE_H_
#define TANDEM_SERVER_SERVICE_TASK_ADMIN_SERVICE_H_

#include "base/grpc_caller_gate.h"
#include "proto/task_admin.grpc.pb.h"
#include "server/core/task_host.h"

namespace tandem::server {

class TaskAdminService final : public proto::TaskAdmin::Service {
 public:
  TaskAdminService(TaskHost* tasks, const CallerGate* gate) : tasks_(tasks), gate_(gate) {}

  grpc::Status CreateTask(grpc::ServerContext* context, const proto::CreateTaskRequest* request,
                          proto::TaskInfo* response) override;
  grpc::Status ListTasks(grpc::ServerContext* context, const proto::ListTasksRequest* request,
                         proto::ListTasksResponse* response) override;
  grpc::Status GetTask(grpc::ServerContext* context, const proto::TaskRequest* request,
                       proto::TaskInfo* response) override;
  grpc::Status PauseTask(grpc::ServerContext* context, const proto::TaskRequest* request,
                         proto::TaskInfo* response) override;
  grpc::Status ResumeTask(grpc::ServerContext* context, const proto::TaskRequest* request,
                          proto::TaskInfo* response) override;
  grpc::Status DeleteTask(grpc::ServerContext* context, const proto::TaskRequest* request,
                          proto::TaskInfo* response) override;
  grpc::Status ExportModel(grpc::ServerContext* context, const proto::ExportModelRequest* request,
                           grpc::ServerWriter<proto::ModelFileChunk>* writer) override;

 private:
  TaskHost* const tasks_;
  const CallerGate* const gate_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_TASK_ADMIN_SERVICE_H_
