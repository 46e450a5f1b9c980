// RoundTransport over gRPC: the Coordinator service and the two
// aggregators' upload services (channels cached per endpoint address and TLS
// name; a non-empty Endpoint.server_name is the SSL target name override, so
// the server certificate must carry that identity).
// Thread-safe; Cancel() cancels calls in flight and makes later ones fail
// with CANCELLED.
#ifndef TANDEM_CLIENT_TRANSPORT_GRPC_ROUND_TRANSPORT_H_
#define TANDEM_CLIENT_TRANSPORT_GRPC_ROUND_TRANSPORT_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "client/internal/round_transport.h"
#include "client/transport/grpc_uploader.h"
#include "proto/coordinator.grpc.pb.h"

namespace tandem::client {

class GrpcRoundTransport : public RoundTransport {
 public:
  // `clock` is not owned. Credentials apply to every channel. A model
  // download announcing more than `max_model_bytes` is refused
  // (INVALID_ARGUMENT) before anything is buffered.
  // `coordinator_name`: the TLS identity checked on the coordinator's
  // channel (empty: the host of `coordinator`).
  GrpcRoundTransport(const std::string& coordinator,
                     std::shared_ptr<grpc::ChannelCredentials> credentials, Clock* clock,
                     RetryPolicy policy, uint64_t max_model_bytes = uint64_t{256} << 20,
                     const std::string& coordinator_name = "");

  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& request) override;
  absl::StatusOr<std::string> DownloadModel(const proto::DownloadModelRequest& request) override;
  absl::Status UploadDone(const proto::UploadDoneRequest& request) override;
  absl::Status Upload(const proto::Endpoint& leader, const proto::Endpoint& helper,
                      const proto::UploadRequest& to_leader,
                      const proto::UploadRequest& to_helper) override;
  void Cancel() override;

 private:
  // Registers a context for Cancel(); returns false when already cancelled.
  bool Track(grpc::ClientContext* ctx);
  void Untrack(grpc::ClientContext* ctx);
  void SetDeadline(grpc::ClientContext* ctx) const;
  // `server_name` empty = the address's host is the TLS name.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address,
                                           const std::string& server_name = "");

  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  Clock* clock_;
  RetryPolicy policy_;
  uint64_t max_model_bytes_;
  std::unique_ptr<proto::Coordinator::Stub> coordinator_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
  // Keyed by (address, TLS name).
  std::map<std::pair<std::string, std::string>, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_TRANSPORT_GRPC_ROUND_TRANSPORT_H_
