#include "ml/worker/worker_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/grpc_metrics.h"
#include "base/grpc_policy.h"
#include "base/grpc_status.h"
#include "base/logging.h"
#include "base/net_address.h"
#include "ml/kernels/backend.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"

namespace tandem::ml::worker {
namespace {

std::vector<std::string> Union(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

absl::Status ByteReservation::Add(int64_t bytes) {
  const int64_t before = in_use_->fetch_add(bytes);
  if (before + bytes > limit_) {
    in_use_->fetch_sub(bytes);
    return absl::ResourceExhaustedError(absl::StrCat("the worker holds ", before,
                                                     " bytes of streamed requests (limit ", limit_,
                                                     "); retry later"));
  }
  held_ += bytes;
  return absl::OkStatus();
}

WorkerService::WorkerService(const KernelRegistry* registry, const Clock* clock,
                             WorkerOptions options, ModelStore* models, KvCacheStore* caches)
    : registry_(registry),
      clock_(clock),
      options_(std::move(options)),
      models_(models),
      caches_(caches),
      callers_gate_("worker", Union(options_.callers, options_.model_writers),
                    !options_.tls.insecure_plaintext, &refusals_),
      writers_gate_("models", options_.model_writers, !options_.tls.insecure_plaintext,
                    &refusals_) {}

grpc::Status WorkerService::Admit(const grpc::ServerContext& context, bool writer) const {
  if (grpc::Status s = callers_gate_.Admit(context); !s.ok()) return s;
  return writer ? writers_gate_.Admit(context) : grpc::Status::OK;
}

grpc::Status WorkerService::AdmitTraining(const grpc::ServerContext& context,
                                          const proto::KernelRequest& request) const {
  // A kernel that trains a held model in place changes it as LoadModel
  // would: only model writers may.
  const KernelSpec* spec = registry_->Find(request.kernel());
  if (spec != nullptr && spec->trains_model && !request.model().name().empty()) {
    return writers_gate_.Admit(context);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::TakeSlot() {
  if (in_flight_.fetch_add(1) >= options_.max_concurrency) {
    in_flight_.fetch_sub(1);
    return ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("worker is running ", options_.max_concurrency, " calls; retry later")));
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<WorkerService>> WorkerService::Create(const KernelRegistry* registry,
                                                                     const Clock* clock,
                                                                     WorkerOptions options,
                                                                     ModelStore* models,
                                                                     KvCacheStore* caches) {
  if (registry == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("registry and clock are required");
  }
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrency must be >= 1, got ", options.max_concurrency));
  }
  if (options.max_stream_bytes < 1) {
    return absl::InvalidArgumentError("max_stream_bytes must be >= 1");
  }
  if (options.max_message_bytes < 1024 || options.max_message_bytes >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_message_bytes must be in [1 KiB, 2 GiB), got ", options.max_message_bytes));
  }
  if (options.max_inflight_bytes < 1) {
    return absl::InvalidArgumentError("max_inflight_bytes must be >= 1");
  }
  if (!options.tls.insecure_plaintext && options.callers.empty() && options.model_writers.empty()) {
    return absl::InvalidArgumentError(
        "a TLS worker needs the identities allowed to call it (--callers, --model_writers)");
  }
  return std::unique_ptr<WorkerService>(
      new WorkerService(registry, clock, std::move(options), models, caches));
}

grpc::Status WorkerService::Health(grpc::ServerContext* context, const proto::HealthRequest*,
                                   proto::HealthResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  response->set_serving(true);
  response->set_backend(kernels::ActiveBackendDescription());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Capabilities(grpc::ServerContext* context,
                                         const proto::CapabilitiesRequest*,
                                         proto::CapabilitiesResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  for (proto::KernelInfo& info : registry_->Describe()) *response->add_kernels() = std::move(info);
  response->set_active_backend(kernels::ActiveBackendDescription());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Run(grpc::ServerContext* context, const proto::KernelRequest* request,
                                proto::KernelResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (grpc::Status s = AdmitTraining(*context, *request); !s.ok()) return s;
  if (grpc::Status s = TakeSlot(); !s.ok()) return s;
  SlotGuard guard(&in_flight_);
  return RunInSlot(*request, nullptr, response, CacheOwner(*context));
}

size_t WorkerService::StreamChunkBytes() const {
  return std::min(kStreamChunkBytes, static_cast<size_t>(options_.max_message_bytes / 2));
}

grpc::Status WorkerService::RunInSlot(const proto::KernelRequest& req,
                                      std::vector<TensorBytes>* streamed,
                                      proto::KernelResponse* response,
                                      absl::string_view cache_owner) {
  const proto::KernelRequest* request = &req;
  absl::StatusOr<KernelCall> call =
      streamed == nullptr
          ? registry_->Validate(*request, models_, caches_, cache_owner)
          : registry_->Validate(*request, std::move(*streamed), models_, caches_, cache_owner);
  if (!call.ok()) {
    TANDEM_VLOG(1) << "rejected " << request->kernel() << ": " << call.status().code();
    return ToGrpcStatus(call.status());
  }
  const KernelSpec* spec = registry_->Find(request->kernel());
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::vector<proto::Tensor>> outputs = registry_->RunCall(*spec, *call);
  const absl::Duration elapsed = clock_->Now() - start;
  if (!outputs.ok()) return ToGrpcStatus(outputs.status());
  for (size_t i = 0; i < outputs->size(); ++i) {
    absl::Status finite = CheckFiniteOutput(
        (*outputs)[i],
        absl::StrCat(request->kernel(), " output ", i, " (", (*outputs)[i].name(), ")"));
    if (!finite.ok()) return ToGrpcStatus(finite);
  }
  for (proto::Tensor& t : *outputs) *response->add_outputs() = std::move(t);
  response->set_backend(std::string(kernels::BackendName(call->backend)));
  response->set_elapsed_us(absl::ToInt64Microseconds(elapsed));
  if (call->model != nullptr) {
    response->mutable_model()->set_name(request->model().name());
    response->mutable_model()->set_version(call->model->version());
  }
  TANDEM_VLOG(1) << request->kernel() << " on " << response->backend() << " in "
                 << response->elapsed_us() << " us";
  return grpc::Status::OK;
}

grpc::Status WorkerService::RunStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::KernelResponseChunk, proto::KernelRequestChunk>* stream) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  // The slot is taken before the stream is read: a caller cannot make the
  // worker buffer a request it has no slot to run.
  if (grpc::Status s = TakeSlot(); !s.ok()) return s;
  SlotGuard guard(&in_flight_);
  ByteReservation bytes(&inflight_bytes_, options_.max_inflight_bytes);
  // Inputs are validated chunk by chunk and land in place; the declared
  // bytes are reserved on the header, before any buffer is allocated.
  RequestAssembler assembler(static_cast<size_t>(options_.max_stream_bytes),
                             /*float_storage=*/true);
  assembler.OnHeader([&bytes](const proto::KernelRequest&, size_t declared) {
    return bytes.Add(static_cast<int64_t>(declared));
  });
  if (absl::Status s = ReadAllChunks<proto::KernelRequestChunk>(*stream, assembler, bytes);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<Streamed<proto::KernelRequest>> request = assembler.FinishStreamed();
  if (!request.ok()) return ToGrpcStatus(absl::InvalidArgumentError(request.status().message()));
  if (grpc::Status s = AdmitTraining(*context, request->header); !s.ok()) return s;
  proto::KernelResponse response;
  grpc::Status s = RunInSlot(request->header, &request->data, &response, CacheOwner(*context));
  if (!s.ok()) return s;
  request->data.clear();
  const bool sent = WriteResponseChunks(
      response, StreamChunkBytes(),
      [stream](const proto::KernelResponseChunk& c) { return stream->Write(c); });
  if (!sent) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

RunningWorker::~RunningWorker() {
  if (server != nullptr)
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

absl::StatusOr<std::unique_ptr<RunningWorker>> StartWorker(
    const std::string& listen, const KernelRegistry* registry, const Clock* clock,
    WorkerOptions options, std::shared_ptr<prometheus::Registry> rpc_metrics, ModelStore* models,
    KvCacheStore* caches) {
  auto service = WorkerService::Create(registry, clock, options, models, caches);
  if (!service.ok()) return service.status();
  auto running = std::make_unique<RunningWorker>();
  running->service = *std::move(service);
  if (options.tls.insecure_plaintext && !IsLoopbackAddress(listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a plaintext worker is refused on the non-loopback address '", listen,
                     "': give it a certificate (--tls_cert, --tls_key, --tls_ca) and its callers"));
  }
  TlsFiles tls = options.tls;
  tls.require_client_cert = !tls.insecure_plaintext;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeServerCredentials(tls);
  if (!creds.ok()) return creds.status();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, *creds, &running->port);
  rpc::ExclusiveListener(builder);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  builder.RegisterService(running->service.get());
  if (rpc_metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(MakeRpcMetricsInterceptorFactory(std::move(rpc_metrics)));
    builder.experimental().SetInterceptorCreators(std::move(counting));
  }
  running->server = builder.BuildAndStart();
  if (running->server == nullptr || running->port == 0) {
    running->server.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  return running;
}

}  // namespace tandem::ml::worker
