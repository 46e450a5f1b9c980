#include "server/service/task_commands.h"

#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "ml/model/safetensors.h"
#include "proto/task_admin.grpc.pb.h"
#include "server/core/task_spec.h"

namespace tandem::server {
namespace {

void PrintTask(const proto::TaskInfo& t) {
  const proto::CoordinatorStatusResponse& s = t.status();
  std::printf("%s %s origin=%s population=%s", t.task_id().c_str(), t.state().c_str(),
              t.origin().c_str(),
              (t.spec().population().empty() ? t.task_id() : t.spec().population()).c_str());
  if (t.has_status()) {
    std::printf(" phase=%s rounds=%llu/%llu epsilon=%.3g", s.phase().c_str(),
                static_cast<unsigned long long>(s.completed_rounds()),
                static_cast<unsigned long long>(s.total_rounds()), s.epsilon_spent());
    if (!s.done_reason().empty()) std::printf(" (%s)", s.done_reason().c_str());
  }
  std::printf(" updated=%s by=%s\n",
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(t.updated_unix_ms()),
                               absl::UTCTimeZone())
                  .c_str(),
              t.updated_by().empty() ? "-" : t.updated_by().c_str());
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::Status Export(proto::TaskAdmin::Stub& stub, const TaskCommandArgs& args) {
  if (args.out.empty()) return absl::InvalidArgumentError("task export needs --out");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  proto::ExportModelRequest req;
  req.set_task_id(args.task);
  req.set_version(args.version);
  auto reader = stub.ExportModel(&ctx, req);
  std::string data, digest;
  uint64_t version = 0;
  for (proto::ModelFileChunk c; reader->Read(&c);) {
    if (c.offset() != data.size() || c.total_bytes() > (uint64_t{1} << 33)) {
      return absl::DataLossError("the export stream is out of order");
    }
    data += c.data();
    version = c.version();
    if (!c.sha256().empty()) digest = c.sha256();
  }
  TANDEM_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  unsigned char want[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), want, &len, EVP_sha256(), nullptr) != 1 ||
      digest != std::string(reinterpret_cast<char*>(want), len)) {
    return absl::DataLossError("the exported file does not match its SHA-256");
  }
  // Validated (layout, sizes, dtypes) before it is written.
  TANDEM_ASSIGN_OR_RETURN(const ml::SafetensorsFile file, ml::DecodeSafetensors(data));
  TANDEM_RETURN_IF_ERROR(ml::WriteSafetensorsFile(args.out, file));
  std::printf("exported task %s version %llu: %zu tensors, %zu bytes -> %s\n", args.task.c_str(),
              static_cast<unsigned long long>(version), file.tensors.size(), data.size(),
              args.out.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTaskCommand(const std::string& verb, const TaskCommandArgs& args) {
  if (args.admin.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("task ", verb, " needs --admin=HOST:PORT"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto creds, MakeChannelCredentials(args.tls));
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxSendMessageSize(49 << 20);
  channel_args.SetMaxReceiveMessageSize(8 << 20);
  auto stub = proto::TaskAdmin::NewStub(grpc::CreateCustomChannel(args.admin, creds, channel_args));
  if (verb == "export") return Export(*stub, args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  proto::TaskInfo info;
  if (verb == "list") {
    proto::ListTasksResponse r;
    TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub->ListTasks(&ctx, {}, &r)));
    for (const proto::TaskInfo& t : r.tasks()) PrintTask(t);
    return absl::OkStatus();
  }
  if (verb == "create") {
    if (args.spec_path.empty()) return absl::InvalidArgumentError("task create needs --spec=FILE");
    proto::CreateTaskRequest req;
    TANDEM_ASSIGN_OR_RETURN(*req.mutable_spec(), ReadTaskSpec(args.spec_path));
    if (const std::string& w = req.spec().model().weights_file(); !w.empty()) {
      // Relative to the spec's own directory, as the coordinator's
      // --task_spec reads it; the bytes travel, the path does not.
      std::filesystem::path p(w);
      if (p.is_relative()) p = std::filesystem::path(args.spec_path).parent_path() / p;
      TANDEM_ASSIGN_OR_RETURN(*req.mutable_weights(), ReadFile(p.string()));
    }
    TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub->CreateTask(&ctx, req, &info)));
    PrintTask(info);
    return absl::OkStatus();
  }
  proto::TaskRequest req;
  req.set_task_id(args.task);
  grpc::Status s;
  if (verb == "show") {
    s = stub->GetTask(&ctx, req, &info);
  } else if (verb == "pause") {
    s = stub->PauseTask(&ctx, req, &info);
  } else if (verb == "resume") {
    s = stub->ResumeTask(&ctx, req, &info);
  } else if (verb == "delete") {
    s = stub->DeleteTask(&ctx, req, &info);
  } else {
    return absl::InvalidArgumentError("task: create, list, show, pause, resume, delete or export");
  }
  TANDEM_RETURN_IF_ERROR(FromGrpcStatus(s));
  PrintTask(info);
  if (verb == "show") {
    for (const proto::RoundSummary& r : info.status().history()) {
      std::printf("  version %llu: %llu reports, accuracy %.4f, epsilon %.3g\n",
                  static_cast<unsigned long long>(r.model_version()),
                  static_cast<unsigned long long>(r.accepted_reports()), r.accuracy(), r.epsilon());
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::server
