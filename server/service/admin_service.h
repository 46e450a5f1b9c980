// gRPC adapter of the coordinator's operator API (proto CoordinatorAdmin):
// the device registry and the task's full status. Served on its own listener, mutual TLS, and every
// call must pass the gate (operator identities named in the coordinator's
// configuration; PERMISSION_DENIED, counted as "admin/identity", otherwise).
// The operator's identity is recorded with each allow-list entry.
// Thread-safe (the registry and coordinator are). Owns none of the
// registry, the coordinator and the gate; all must outlive the service.
#ifndef TANDEM_SERVER_SERVICE_ADMIN_SERVICE_H_
#define TANDEM_SERVER_SERVICE_ADMIN_SERVICE_H_

#include "base/grpc_caller_gate.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/core/device_registry.h"
#include "server/core/task_host.h"

namespace tandem::server {

// The caller's certificate identities joined by commas, "local" for a
// plaintext loopback caller (the audit trail of every operator change).
std::string OperatorOf(const grpc::ServerContext& context);

class CoordinatorAdminService final : public proto::CoordinatorAdmin::Service {
 public:
  CoordinatorAdminService(DeviceRegistry* devices, TaskHost* tasks, const CallerGate* gate)
      : devices_(devices), tasks_(tasks), gate_(gate) {}

  grpc::Status EnrollDevice(grpc::ServerContext* context, const proto::EnrollDeviceRequest* request,
                            proto::EnrollDeviceResponse* response) override;
  grpc::Status RevokeDevice(grpc::ServerContext* context, const proto::RevokeDeviceRequest* request,
                            proto::RevokeDeviceResponse* response) override;
  grpc::Status ListDevices(grpc::ServerContext* context, const proto::ListDevicesRequest* request,
                           proto::ListDevicesResponse* response) override;
  // Everything Coordinator::Status() knows of the task named (empty: the
  // command line's), live counts of the open round and the worker's
  // address and last error included (the public Status omits them).
  // NOT_FOUND for an unknown task.
  grpc::Status Status(grpc::ServerContext* context, const proto::CoordinatorStatusRequest* request,
                      proto::CoordinatorStatusResponse* response) override;

 private:
  DeviceRegistry* const devices_;
  TaskHost* const tasks_;
  const CallerGate* const gate_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_ADMIN_SERVICE_H_
