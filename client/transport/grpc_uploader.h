// Uploader over gRPC with bounded retries of transient errors (UNAVAILABLE,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED from flow control) and exponential
// backoff through the injected Clock.
#ifndef TANDEM_CLIENT_TRANSPORT_GRPC_UPLOADER_H_
#define TANDEM_CLIENT_TRANSPORT_GRPC_UPLOADER_H_

#include <grpcpp/channel.h>

#include <memory>

#include "absl/time/time.h"
#include "base/clock.h"
#include "base/grpc_policy.h"
#include "client/transport/uploader.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::client {

struct RetryPolicy {
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  absl::Duration call_deadline = rpc::kDeviceCallDeadline;
};

class GrpcUploader : public Uploader {
 public:
  // `clock` is not owned and must outlive the uploader.
  GrpcUploader(std::shared_ptr<grpc::Channel> leader, std::shared_ptr<grpc::Channel> helper,
               Clock* clock, RetryPolicy policy = {});
  // The leader's request, then the helper's (none when the leader refuses).
  absl::Status Upload(const proto::UploadRequest& to_leader,
                      const proto::UploadRequest& to_helper) override;
  // One server's request alone, with the same retries (errors prefixed with
  // the server's role). For callers that send both shares at once from
  // separate threads; thread-safe (gRPC stubs are).
  absl::Status UploadToLeader(const proto::UploadRequest& request);
  absl::Status UploadToHelper(const proto::UploadRequest& request);

 private:
  absl::Status UploadOne(proto::AggregatorUpload::Stub& stub, const proto::UploadRequest& req,
                         const char* server);
  std::unique_ptr<proto::AggregatorUpload::Stub> leader_, helper_;
  Clock* clock_;
  RetryPolicy policy_;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_TRANSPORT_GRPC_UPLOADER_H_
