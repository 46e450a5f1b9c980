// gRPC <-> absl status conversion (target tandem_base_grpc, so that
// tandem_base itself never links gRPC). The numeric codes of the two
// libraries coincide; messages are carried over unchanged.
#ifndef TANDEM_BASE_GRPC_STATUS_H_
#define TANDEM_BASE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tandem {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tandem

#endif  // TANDEM_BASE_GRPC_STATUS_H_
