#include "server/service/admin_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/grpc_status.h"
#include "base/logging.h"
#include "server/service/coordinator_service.h"

namespace tandem::server {
// The operator's certificate identities, for the audit trail ("local" for
// a plaintext loopback caller, which has none).
std::string OperatorOf(const grpc::ServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  const std::vector<std::string> ids =
      auth == nullptr ? std::vector<std::string>() : PeerIdentities(*auth);
  return ids.empty() ? "local" : absl::StrJoin(ids, ",");
}

grpc::Status CoordinatorAdminService::EnrollDevice(grpc::ServerContext* context,
                                                   const proto::EnrollDeviceRequest* request,
                                                   proto::EnrollDeviceResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  const std::string op = OperatorOf(*context);
  absl::StatusOr<proto::DeviceRecord> d = devices_->EnrollKey(request->public_key(), op);
  if (!d.ok()) return ToGrpcStatus(d.status());
  TANDEM_LOG(INFO) << "admin: " << op << " enrolled device " << d->device_id();
  *response->mutable_device() = *std::move(d);
  return grpc::Status::OK;
}

grpc::Status CoordinatorAdminService::RevokeDevice(grpc::ServerContext* context,
                                                   const proto::RevokeDeviceRequest* request,
                                                   proto::RevokeDeviceResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  absl::StatusOr<proto::DeviceRecord> d = devices_->Revoke(request->device_id());
  if (!d.ok()) return ToGrpcStatus(d.status());
  TANDEM_LOG(INFO) << "admin: " << OperatorOf(*context) << " revoked device " << d->device_id();
  *response->mutable_device() = *std::move(d);
  return grpc::Status::OK;
}

grpc::Status CoordinatorAdminService::ListDevices(grpc::ServerContext* context,
                                                  const proto::ListDevicesRequest*,
                                                  proto::ListDevicesResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  for (proto::DeviceRecord& d : devices_->List()) *response->add_devices() = std::move(d);
  return grpc::Status::OK;
}

grpc::Status CoordinatorAdminService::Status(grpc::ServerContext* context,
                                             const proto::CoordinatorStatusRequest* request,
                                             proto::CoordinatorStatusResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  return FullStatus(*tasks_, *request, response);
}

}  // namespace tandem::server
