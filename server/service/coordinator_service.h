// gRPC adapter of the Coordinator (proto/coordinator.proto). Maps absl
// statuses to gRPC codes; streams the model in chunks of at most
// chunk_bytes (1 MiB by default), so no message nears gRPC's 4 MB default
// limit whatever the model size; the last chunk carries the SHA-256 of the
// whole serialized Model.
// Status is the public view (RedactForPublic); operators read the full one
// on the admin listener (CoordinatorAdmin.Status, admin_service.h).
// Routes every call to its task (task_host.h). Thread-safe (the host is).
// Does not own the host.
#ifndef TANDEM_SERVER_SERVICE_COORDINATOR_SERVICE_H_
#define TANDEM_SERVER_SERVICE_COORDINATOR_SERVICE_H_

#include <cstddef>

#include "proto/coordinator.grpc.pb.h"
#include "server/core/task_host.h"

namespace tandem::server {

// The full status of the task `request` names (task_host.h: an empty id
// names the command line's task; NOT_FOUND for an unknown one): the
// operator's view, before any redaction. Shared by the public and the admin
// Status RPCs.
grpc::Status FullStatus(TaskHost& tasks, const proto::CoordinatorStatusRequest& request,
                        proto::CoordinatorStatusResponse* response);

// Clears what an anonymous caller must not see: the open round's live
// counts (assigned, uploads_done) and the worker's address and last error.
void RedactForPublic(proto::CoordinatorStatusResponse* status);

class CoordinatorService final : public proto::Coordinator::Service {
 public:
  explicit CoordinatorService(TaskHost* tasks, size_t chunk_bytes = size_t{1} << 20)
      : tasks_(tasks), chunk_bytes_(chunk_bytes) {}

  grpc::Status CheckIn(grpc::ServerContext* context, const proto::CheckInRequest* request,
                       proto::CheckInResponse* response) override;
  grpc::Status DownloadModel(grpc::ServerContext* context,
                             const proto::DownloadModelRequest* request,
                             grpc::ServerWriter<proto::ModelChunk>* writer) override;
  grpc::Status UploadDone(grpc::ServerContext* context, const proto::UploadDoneRequest* request,
                          proto::UploadDoneResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::CoordinatorStatusRequest* request,
                      proto::CoordinatorStatusResponse* response) override;

 private:
  TaskHost* tasks_;
  size_t chunk_bytes_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_COORDINATOR_SERVICE_H_
