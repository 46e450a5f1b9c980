// ModelEvaluator over an ML worker (tandem-worker, proto/worker.proto): each
// released global model is loaded on the worker as the named model
// "federation.<task_id>" at its version (LoadModel, chunked, replacing the
// previous version), then evaluated there by the kernel "model.evaluate" on
// the coordinator's held-out data. Between rounds the worker keeps the model,
// so apps can run "model.predict" against it (model serving).
//
// Transport: mutual TLS (the worker admits the coordinator's identity by its
// --callers / --model_writers; the coordinator pins the worker's name), or
// plaintext to a loopback worker only: the held-out data travels in each
// request. The model it receives is the released, differentially private
// model, not a secret.
//
// Thread safety: Evaluate from one thread at a time (the coordinator's
// driver); Status from any thread.
#ifndef TANDEM_SERVER_TRANSPORT_WORKER_EVALUATOR_H_
#define TANDEM_SERVER_TRANSPORT_WORKER_EVALUATOR_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/grpc_credentials.h"
#include "ml/data/dataset.h"
#include "proto/worker.grpc.pb.h"
#include "server/core/model_evaluator.h"

namespace tandem::server {

struct WorkerEvaluatorOptions {
  std::string address;  // host:port of tandem-worker
  // Transport: mutual TLS with this daemon's certificate (the worker's
  // --callers / --model_writers name it), the worker verified against
  // tls.root_ca_path under `server_name`; plaintext only to a loopback
  // address (the held-out data travels in the request).
  TlsFiles tls = PlaintextTls();
  std::string server_name = "worker.tandem";
  std::string task_id;  // names the model: "federation.<task_id>"
  absl::Duration deadline = absl::Seconds(120);  // per RPC
  size_t chunk_bytes = size_t{1} << 20;          // LoadModel chunk payload
};

class WorkerEvaluator : public ModelEvaluator {
 public:
  // `eval` is the held-out data sent with each evaluation (copied into the
  // request once, here). INVALID_ARGUMENT for an empty address or task id,
  // plaintext to a non-loopback address, TLS without a certificate, key or
  // server name,
  // empty or invalid data, or chunk_bytes of 0. Connects lazily: an absent
  // worker fails Evaluate with UNAVAILABLE, not Create.
  static absl::StatusOr<std::unique_ptr<WorkerEvaluator>> Create(WorkerEvaluatorOptions options,
                                                                 const ml::Dataset& eval);
  // As Create, over a given channel (tests).
  static absl::StatusOr<std::unique_ptr<WorkerEvaluator>> CreateWithChannel(
      WorkerEvaluatorOptions options, const ml::Dataset& eval,
      std::shared_ptr<grpc::Channel> channel);

  absl::StatusOr<ml::EvalStats> Evaluate(const ml::Model& model, const proto::ModelSpec& spec,
                                         uint64_t version) override;
  proto::WorkerModelStatus Status() override;

  const std::string& model_name() const { return model_name_; }

 private:
  WorkerEvaluator(WorkerEvaluatorOptions options, std::shared_ptr<grpc::Channel> channel);
  absl::Status Push(const ml::Model& model, const proto::ModelSpec& spec, uint64_t version);
  absl::StatusOr<ml::EvalStats> RunEvaluate(uint64_t version);
  void RecordFailure(const absl::Status& status);

  const WorkerEvaluatorOptions options_;
  const std::string model_name_;
  std::unique_ptr<proto::Worker::Stub> stub_;
  proto::KernelRequest eval_request_;  // inputs filled once; model ref per call

  absl::Mutex mu_;
  proto::WorkerModelStatus status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_TRANSPORT_WORKER_EVALUATOR_H_
