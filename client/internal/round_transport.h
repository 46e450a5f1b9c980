// Internal: what the round runner needs from the network. The gRPC
// implementation is client/transport/grpc_round_transport.h; the runner never
// sees gRPC. Implementations are thread-safe; Cancel() makes calls in flight
// return CANCELLED.
#ifndef TANDEM_CLIENT_INTERNAL_ROUND_TRANSPORT_H_
#define TANDEM_CLIENT_INTERNAL_ROUND_TRANSPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/aggregator.pb.h"
#include "proto/coordinator.pb.h"

namespace tandem::client {

class RoundTransport {
 public:
  virtual ~RoundTransport() = default;
  virtual absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& request) = 0;
  // The serialized proto::Model, reassembled from its chunks; DATA_LOSS when
  // offsets, sizes or the SHA-256 do not match.
  virtual absl::StatusOr<std::string> DownloadModel(const proto::DownloadModelRequest& request) = 0;
  virtual absl::Status UploadDone(const proto::UploadDoneRequest& request) = 0;
  // Uploads to both aggregators (with retries); both must accept.
  virtual absl::Status Upload(const proto::Endpoint& leader, const proto::Endpoint& helper,
                              const proto::UploadRequest& to_leader,
                              const proto::UploadRequest& to_helper) = 0;
  virtual void Cancel() = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_ROUND_TRANSPORT_H_
