#include "client/transport/grpc_round_transport.h"

#include <grpcpp/create_channel.h>
#include <openssl/evp.h>

#include "absl/strings/str_cat.h"
#include "base/grpc_policy.h"
#include "base/grpc_status.h"

namespace tandem::client {

GrpcRoundTransport::GrpcRoundTransport(const std::string& coordinator,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                                       Clock* clock, RetryPolicy policy, uint64_t max_model_bytes,
                                       const std::string& coordinator_name)
    : credentials_(std::move(credentials)),
      clock_(clock),
      policy_(policy),
      max_model_bytes_(max_model_bytes) {
  coordinator_ = proto::Coordinator::NewStub(ChannelTo(coordinator, coordinator_name));
}

std::shared_ptr<grpc::Channel> GrpcRoundTransport::ChannelTo(const std::string& address,
                                                             const std::string& server_name) {
  absl::MutexLock lock(&mu_);
  const auto key = std::make_pair(address, server_name);
  auto it = channels_.find(key);
  if (it != channels_.end()) return it->second;
  grpc::ChannelArguments args = rpc::ChannelArgs();
  args.SetMaxSendMessageSize(64 << 20);  // key shares grow with D
  // The pinned identity: the server certificate must name it (ignored by
  // plaintext channels).
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  auto channel = grpc::CreateCustomChannel(address, credentials_, args);
  channels_[key] = channel;
  return channel;
}

bool GrpcRoundTransport::Track(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  in_flight_.insert(ctx);
  return true;
}

void GrpcRoundTransport::Untrack(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  in_flight_.erase(ctx);
}

void GrpcRoundTransport::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + policy_.call_deadline));
}

void GrpcRoundTransport::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
}

absl::StatusOr<proto::CheckInResponse> GrpcRoundTransport::CheckIn(
    const proto::CheckInRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!Track(&ctx)) return absl::CancelledError("cancelled");
  proto::CheckInResponse resp;
  const absl::Status s = FromGrpcStatus(coordinator_->CheckIn(&ctx, request, &resp));
  Untrack(&ctx);
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<std::string> GrpcRoundTransport::DownloadModel(
    const proto::DownloadModelRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!Track(&ctx)) return absl::CancelledError("cancelled");
  auto reader = coordinator_->DownloadModel(&ctx, request);
  std::string data, digest;
  uint64_t total = 0;
  bool bad = false, too_large = false;
  for (proto::ModelChunk chunk; reader->Read(&chunk);) {
    if (data.empty()) total = chunk.total_bytes();
    // The announced size is bounded before any of it is buffered.
    if (total > max_model_bytes_) {
      too_large = true;
      ctx.TryCancel();
      break;
    }
    if (chunk.offset() != data.size() || chunk.total_bytes() != total ||
        data.size() + chunk.data().size() > total ||
        chunk.model_version() != request.model_version()) {
      bad = true;
      ctx.TryCancel();
      break;
    }
    data += chunk.data();
    if (!chunk.sha256().empty()) digest = chunk.sha256();
  }
  const absl::Status s = FromGrpcStatus(reader->Finish());
  Untrack(&ctx);
  if (too_large) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator announced a model of ", total,
                                                   " bytes, more than max_model_bytes ",
                                                   max_model_bytes_));
  }
  if (bad) return absl::DataLossError("model chunks out of order or larger than announced");
  if (!s.ok()) return s;
  unsigned char want[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (data.size() != total ||
      EVP_Digest(data.data(), data.size(), want, &len, EVP_sha256(), nullptr) != 1 ||
      digest != std::string(reinterpret_cast<const char*>(want), len)) {
    return absl::DataLossError("downloaded model is incomplete or fails its SHA-256 check");
  }
  return data;
}

absl::Status GrpcRoundTransport::UploadDone(const proto::UploadDoneRequest& request) {
  absl::Duration backoff = policy_.initial_backoff;
  absl::Status last;
  for (int attempt = 1; attempt <= policy_.max_attempts; ++attempt) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (!Track(&ctx)) return absl::CancelledError("cancelled");
    proto::UploadDoneResponse resp;
    last = FromGrpcStatus(coordinator_->UploadDone(&ctx, request, &resp));
    Untrack(&ctx);
    if (last.ok() || !(absl::IsUnavailable(last) || absl::IsDeadlineExceeded(last))) return last;
    clock_->SleepFor(backoff);
    backoff = std::min(backoff * 2, policy_.max_backoff);
  }
  return last;
}

absl::Status GrpcRoundTransport::Upload(const proto::Endpoint& leader,
                                        const proto::Endpoint& helper,
                                        const proto::UploadRequest& to_leader,
                                        const proto::UploadRequest& to_helper) {
  if (leader.address().empty() || helper.address().empty()) {
    return absl::InvalidArgumentError("the assignment names no aggregator endpoints");
  }
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("cancelled");
  }
  GrpcUploader uploader(ChannelTo(leader.address(), leader.server_name()),
                        ChannelTo(helper.address(), helper.server_name()), clock_, policy_);
  return uploader.Upload(to_leader, to_helper);
}

}  // namespace tandem::client
