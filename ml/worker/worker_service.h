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
// Thread safety: all methods may be called concurrently (gRPC sync server
// threads). The registry, clock and model store are not owned and must
// outlive the service.
#ifndef TANDEM_ML_WORKER_WORKER_SERVICE_H_
#define TANDEM_ML_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "ml/worker/kernel_registry.h"
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
  int max_concurrency = 4;                       // simultaneous Run calls, >= 1
  int64_t max_message_bytes = int64_t{64} << 20; // gRPC receive/send cap per message
  int64_t max_stream_bytes = int64_t{1} << 30;   // RunStream / LoadModel: total tensor bytes
  // Directory LoadModel may read checkpoints from (checkpoint_path is
  // relative to it and may not leave it); empty = checkpoints refused.
  std::string model_dir = {};
};

class WorkerService final : public proto::Worker::Service {
 public:
  // INVALID_ARGUMENT when max_concurrency < 1 or max_message_bytes is not in
  // [1 KiB, 2 GiB). registry and clock: not owned, non-null.
  static absl::StatusOr<std::unique_ptr<WorkerService>> Create(const KernelRegistry* registry,
                                                               const Clock* clock,
                                                               WorkerOptions options,
                                                               ModelStore* models = nullptr);

  grpc::Status Health(grpc::ServerContext* context, const proto::HealthRequest* request,
                      proto::HealthResponse* response) override;
  grpc::Status Capabilities(grpc::ServerContext* context,
                            const proto::CapabilitiesRequest* request,
                            proto::CapabilitiesResponse* response) override;
  grpc::Status Run(grpc::ServerContext* context, const proto::KernelRequest* request,
                   proto::KernelResponse* response) override;
  // Chunked Run (ml/worker/tensor_stream.h); the response is sent in chunks
  // of at most max_message_bytes / 2 of tensor data.
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

  const WorkerOptions& options() const { return options_; }
  int in_flight() const { return in_flight_.load(); }

 private:
  WorkerService(const KernelRegistry* registry, const Clock* clock, WorkerOptions options,
                ModelStore* models)
      : registry_(registry), clock_(clock), options_(std::move(options)), models_(models) {}

  // The tensors of a LoadModel header, or of its checkpoint_path.
  absl::StatusOr<TensorSet> ModelTensorsOf(const proto::ModelHeader& header) const;

  const KernelRegistry* registry_;
  const Clock* clock_;
  const WorkerOptions options_;
  ModelStore* const models_;
  std::atomic<int> in_flight_{0};
};

// A started gRPC server with its service. Destruction shuts the server down.
struct RunningWorker {
  std::unique_ptr<WorkerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (useful with ":0")
  ~RunningWorker();
};

// Builds the service and starts an insecure server on `listen` (host:port;
// port 0 picks a free one). With `rpc_metrics`, every call is counted into
// it by method and status code (base/grpc_metrics.h). INVALID_ARGUMENT for
// bad options, UNAVAILABLE when the address cannot be bound.
absl::StatusOr<std::unique_ptr<RunningWorker>> StartWorker(
    const std::string& listen, const KernelRegistry* registry, const Clock* clock,
    WorkerOptions options, std::shared_ptr<prometheus::Registry> rpc_metrics = nullptr,
    ModelStore* models = nullptr);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_WORKER_SERVICE_H_
