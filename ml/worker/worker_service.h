// gRPC adapter of tandem-worker: proto::Worker over a KernelRegistry.
// Run = Validate (registry) -> runner (ml/kernels) -> ToGrpcStatus.
// At most max_concurrency Run calls execute at once; a call beyond that
// fails fast with RESOURCE_EXHAUSTED (clients back off and retry) instead
// of queueing on the server.
//
//   client ---Run(req)---> WorkerService
//                            |-- slot? no --> RESOURCE_EXHAUSTED
//                            |-- registry.Validate --> INVALID_ARGUMENT /
//                            |                         UNIMPLEMENTED / UNAVAILABLE
//                            |-- spec.run(call) (CPU or CUDA)
//   client <--outputs, backend, elapsed_us--
//
// Models as resources (LoadModel, ReadModel, UnloadModel, ListModels;
// ml/worker/model_service.cc) live in a ModelStore; Run resolves
// KernelRequest.model through it. Without a store the model RPCs answer
// FAILED_PRECONDITION.
//
// KV caches as resources (CreateKvCache, AppendKvCache, DropKvCache,
// ListKvCaches; ml/worker/kv_cache_service.cc) live in a KvCacheStore
// under --max_gpu_mb; Run resolves KernelRequest.kv_cache through it.
// Without a store the cache RPCs answer FAILED_PRECONDITION. They pass the
// caller gate only (a cache is serving state, not the federation's model);
// AppendKvCache, a stream, takes a slot and the in-flight byte budget as
// LoadModel does.
//
// Trust (issue 34 item 6; ARCHITECTURE.md trust model): with TLS the
// listener requires client certificates (mutual TLS) and every RPC passes a
// caller gate (identities in `callers` or `model_writers`, else
// PERMISSION_DENIED); LoadModel and UnloadModel, which change what the
// coordinator's `federation.<task>` model is, pass a second gate
// (`model_writers` only), as does a Run of a kernel that trains a held
// model in place. Plaintext is served only on a loopback address
// (StartWorker refuses any other). Every streaming RPC (RunStream,
// LoadModel, ReadModel) takes a concurrency slot before it reads anything,
// and the tensor bytes all streams declare at once (header chunks included)
// are bounded by max_inflight_bytes, reserved when a header arrives and
// before its buffers are allocated (RESOURCE_EXHAUSTED beyond), so a caller
// cannot make the worker buffer max_stream_bytes per stream before a slot
// and the budget are checked.
//
// Streams (ml/worker/tensor_stream.h) move tensors at memory speed: each
// input lands in one buffer of its declared size, which the kernel then
// reads without a copy (float32), and responses and models leave in chunks
// of kStreamChunkBytes (at most max_message_bytes / 2) sliced from the
// result.
//
// Thread safety: all methods may be called concurrently (gRPC sync server
// threads). The registry, clock, model store and KV cache store are not
// owned and must outlive the service.
#ifndef TANDEM_ML_WORKER_WORKER_SERVICE_H_
#define TANDEM_ML_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/grpc_caller_gate.h"
#include "base/grpc_credentials.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/model_store.h"
#include "proto/worker.grpc.pb.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace prometheus {
class Registry;
}  // namespace prometheus

namespace tandem::ml::worker {

struct WorkerOptions {
  // Simultaneous Run / RunStream / LoadModel / ReadModel calls, >= 1.
  int max_concurrency = 4;
  int64_t max_message_bytes = int64_t{64} << 20; // gRPC receive/send cap per message
  int64_t max_stream_bytes = int64_t{1} << 30;   // RunStream / LoadModel: total tensor bytes
  // Bytes of request chunks all RunStream and LoadModel calls may hold at
  // once (>= 1); a chunk beyond it fails its call with RESOURCE_EXHAUSTED.
  int64_t max_inflight_bytes = int64_t{2} << 30;
  // Directory LoadModel may read checkpoints from (checkpoint_path is
  // relative to it and may not leave it); empty = checkpoints refused.
  std::string model_dir = {};
  // Transport. Plaintext (the default) only on loopback; with a certificate
  // the listener is mutual TLS (require_client_cert is forced on).
  TlsFiles tls = PlaintextTls();
  // With TLS: the identities (certificate DNS SAN, else CN) that may call
  // this worker at all (model_writers may too); at least one is required.
  std::vector<std::string> callers = {};
  // With TLS: the identities that may LoadModel / UnloadModel (e.g. the
  // coordinator, which pushes `federation.<task>`). Empty = nobody.
  std::vector<std::string> model_writers = {};
};

// Releases a WorkerService concurrency slot (the in-flight counter it was
// taken from) on scope exit.
class SlotGuard {
 public:
  explicit SlotGuard(std::atomic<int>* counter) : counter_(counter) {}
  ~SlotGuard() { counter_->fetch_sub(1); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  std::atomic<int>* counter_;
};

// Reserves bytes from a shared budget for as long as it lives. Thread-safe.
class ByteReservation {
 public:
  explicit ByteReservation(std::atomic<int64_t>* in_use, int64_t limit)
      : in_use_(in_use), limit_(limit) {}
  ~ByteReservation() { in_use_->fetch_sub(held_); }
  ByteReservation(const ByteReservation&) = delete;
  ByteReservation& operator=(const ByteReservation&) = delete;
  // RESOURCE_EXHAUSTED (nothing reserved) when `bytes` more would pass the limit.
  absl::Status Add(int64_t bytes);

 private:
  std::atomic<int64_t>* in_use_;
  const int64_t limit_;
  int64_t held_ = 0;
};

class WorkerService final : public proto::Worker::Service {
 public:
  // INVALID_ARGUMENT when max_concurrency < 1, max_message_bytes is not in
  // [1 KiB, 2 GiB), max_inflight_bytes < 1, or TLS is set without callers.
  // registry and clock: not owned, non-null.
  static absl::StatusOr<std::unique_ptr<WorkerService>> Create(const KernelRegistry* registry,
                                                               const Clock* clock,
                                                               WorkerOptions options,
                                                               ModelStore* models = nullptr,
                                                               KvCacheStore* caches = nullptr);

  grpc::Status Health(grpc::ServerContext* context, const proto::HealthRequest* request,
                      proto::HealthResponse* response) override;
  grpc::Status Capabilities(grpc::ServerContext* context,
                            const proto::CapabilitiesRequest* request,
                            proto::CapabilitiesResponse* response) override;
  grpc::Status Run(grpc::ServerContext* context, const proto::KernelRequest* request,
                   proto::KernelResponse* response) override;
  // Chunked Run (ml/worker/tensor_stream.h); the response is sent in chunks
  // of kStreamChunkBytes, at most max_message_bytes / 2, of tensor data.
  grpc::Status RunStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::KernelResponseChunk, proto::KernelRequestChunk>* stream)
      override;

  // Model RPCs (model_service.cc); codes as in proto/worker.proto.
  grpc::Status LoadModel(grpc::ServerContext* context,
                         grpc::ServerReader<proto::WorkerModelChunk>* reader,
                         proto::ModelInfo* response) override;
  grpc::Status ReadModel(grpc::ServerContext* context, const proto::ReadModelRequest* request,
                         grpc::ServerWriter<proto::WorkerModelChunk>* writer) override;
  grpc::Status UnloadModel(grpc::ServerContext* context, const proto::UnloadModelRequest* request,
                           proto::UnloadModelResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const proto::ListModelsRequest* request,
                          proto::ListModelsResponse* response) override;

  // KV cache RPCs (kv_cache_service.cc); codes as in proto/worker.proto.
  grpc::Status CreateKvCache(grpc::ServerContext* context,
                             const proto::CreateKvCacheRequest* request,
                             proto::KvCacheInfo* response) override;
  grpc::Status AppendKvCache(grpc::ServerContext* context,
                             grpc::ServerReader<proto::KvCacheAppendChunk>* reader,
                             proto::KvCacheInfo* response) override;
  grpc::Status DropKvCache(grpc::ServerContext* context, const proto::DropKvCacheRequest* request,
                           proto::DropKvCacheResponse* response) override;
  grpc::Status ListKvCaches(grpc::ServerContext* context, const proto::ListKvCachesRequest* request,
                            proto::ListKvCachesResponse* response) override;

  const WorkerOptions& options() const { return options_; }
  int in_flight() const { return in_flight_.load(); }
  // Refusals by "worker/identity", "models/identity" (the gates).
  const RefusalCounters& refusals() const { return refusals_; }

 private:
  WorkerService(const KernelRegistry* registry, const Clock* clock, WorkerOptions options,
                ModelStore* models, KvCacheStore* caches);

  // The caller gate (`writer`: the model-writer gate too): OK or
  // PERMISSION_DENIED (counted).
  grpc::Status Admit(const grpc::ServerContext& context, bool writer) const;
  // The model-writer gate when `request` trains a held model in place.
  grpc::Status AdmitTraining(const grpc::ServerContext& context,
                             const proto::KernelRequest& request) const;
  // The identity a caller's KV caches are keyed by (KvCacheStore::Key):
  // its first verified TLS identity (base/grpc_caller_gate.h
  // PeerIdentities), empty on a plaintext worker, where every caller shares
  // one namespace (there is no identity to separate them by).
  static std::string CacheOwner(const grpc::ServerContext& context);
  // A concurrency slot (release with a SlotGuard on in_flight_) or
  // RESOURCE_EXHAUSTED.
  grpc::Status TakeSlot();
  // Run's work once admitted and holding a slot. `streamed`: the inputs'
  // data of a RunStream request (moved from), null for Run.
  // `cache_owner`: the caller's identity, whose KV caches the request may
  // name (CacheOwner).
  grpc::Status RunInSlot(const proto::KernelRequest& request, std::vector<TensorBytes>* streamed,
                         proto::KernelResponse* response, absl::string_view cache_owner);
  // Data bytes per chunk of a streamed response or model.
  size_t StreamChunkBytes() const;

  // The tensors of a LoadModel header (data[i]: tensor i's bytes), or of
  // its checkpoint_path.
  absl::StatusOr<TensorSet> ModelTensorsOf(const proto::ModelHeader& header,
                                           std::vector<TensorBytes> data) const;

  const KernelRegistry* registry_;
  const Clock* clock_;
  const WorkerOptions options_;
  ModelStore* const models_;
  KvCacheStore* const caches_;
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> inflight_bytes_{0};
  RefusalCounters refusals_;
  const CallerGate callers_gate_;
  const CallerGate writers_gate_;
};

// A started gRPC server with its service. Destruction shuts the server down.
struct RunningWorker {
  std::unique_ptr<WorkerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (useful with ":0")
  ~RunningWorker();
};

// Builds the service and starts a server on `listen` (host:port; port 0
// picks a free one): mutual TLS with options.tls's certificate, plaintext
// only on a loopback address (INVALID_ARGUMENT otherwise). With `rpc_metrics`, every call is
// counted into it by method and status code (base/grpc_metrics.h). INVALID_ARGUMENT for bad
// options, UNAVAILABLE when the address cannot be bound.
absl::StatusOr<std::unique_ptr<RunningWorker>> StartWorker(
    const std::string& listen, const KernelRegistry* registry, const Clock* clock,
    WorkerOptions options, std::shared_ptr<prometheus::Registry> rpc_metrics = nullptr,
    ModelStore* models = nullptr, KvCacheStore* caches = nullptr);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_WORKER_SERVICE_H_
