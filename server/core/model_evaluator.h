// Where the coordinator evaluates each released global model: in process
// (the default, ml::GradientEngine over the held-out data) or on an ML worker
// (server/transport/worker_evaluator.h), which also keeps the model loaded as
// a named resource so that apps can run it there (issue 20, "the shared
// model").
//
// Thread safety: Evaluate is called from the coordinator's driver thread only;
// Status may be called from any thread concurrently with it.
#ifndef TANDEM_SERVER_CORE_MODEL_EVALUATOR_H_
#define TANDEM_SERVER_CORE_MODEL_EVALUATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ml/model/model.h"
#include "ml/train/trainer.h"
#include "proto/coordinator.pb.h"

namespace tandem::server {

class ModelEvaluator {
 public:
  virtual ~ModelEvaluator() = default;

  // Hands `model` (the global model of `version`, built from `spec`) to the
  // evaluator and returns its loss and accuracy on the held-out data. Errors
  // are the transport's (UNAVAILABLE, DEADLINE_EXCEEDED) or the worker's;
  // the coordinator then evaluates in process and records the failure.
  virtual absl::StatusOr<ml::EvalStats> Evaluate(const ml::Model& model,
                                                 const proto::ModelSpec& spec,
                                                 uint64_t version) = 0;
  // What the worker holds, for CoordinatorStatusResponse.worker.
  virtual proto::WorkerModelStatus Status() = 0;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_MODEL_EVALUATOR_H_
