#include "client/transport/grpc_uploader.h"

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"

namespace tandem::client {

GrpcUploader::GrpcUploader(std::shared_ptr<grpc::Channel> leader,
                           std::shared_ptr<grpc::Channel> helper, Clock* clock,
                           RetryPolicy policy)
    : leader_(proto::AggregatorUpload::NewStub(std::move(leader))),
      helper_(proto::AggregatorUpload::NewStub(std::move(helper))),
      clock_(clock),
      policy_(policy) {}

absl::Status GrpcUploader::UploadOne(proto::AggregatorUpload::Stub& stub,
                                     const proto::UploadRequest& req, const char* server) {
  absl::Duration backoff = policy_.initial_backoff;
  absl::Status last;
  for (int attempt = 1; attempt <= policy_.max_attempts; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + policy_.call_deadline));
    proto::UploadResponse resp;
    last = FromGrpcStatus(stub.Upload(&ctx, req, &resp));
    if (last.ok()) return last;
    const bool transient = absl::IsUnavailable(last) || absl::IsDeadlineExceeded(last);
    if (!transient || attempt == policy_.max_attempts) break;
    clock_->SleepFor(backoff);
    backoff = std::min(backoff * 2, policy_.max_backoff);
  }
  return absl::Status(last.code(), absl::StrCat(server, ": ", last.message()));
}

absl::Status GrpcUploader::UploadToLeader(const proto::UploadRequest& request) {
  return UploadOne(*leader_, request, "leader");
}

absl::Status GrpcUploader::UploadToHelper(const proto::UploadRequest& request) {
  return UploadOne(*helper_, request, "helper");
}

absl::Status GrpcUploader::Upload(const proto::UploadRequest& to_leader,
                                  const proto::UploadRequest& to_helper) {
  if (absl::Status a = UploadToLeader(to_leader); !a.ok()) return a;
  return UploadToHelper(to_helper);
}

}  // namespace tandem::client
