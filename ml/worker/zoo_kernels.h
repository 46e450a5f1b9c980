// Kernels over a loaded "mlp" or "cnn" model (ml/model/model_zoo.h), the
// kinds of the federation's own model, which the coordinator pushes to the
// worker after every released round (server/transport/worker_evaluator.h):
//   model.evaluate  held-out loss and accuracy: features [n, d], labels [n]
//                   (class indices as float32) -> stats [3] =
//                   {mean cross-entropy, correct, n}; the same computation as
//                   the coordinator's in-process evaluation
//                   (ml::GradientEngine::Evaluate), so both give the same
//                   accuracy on the same data
//   model.predict   serving: features [n, d] -> logits [n, classes]
// Both need a model (KernelRequest.model) and read it under a shared lease.
// Errors: INVALID_ARGUMENT for features whose width is not the model's
// input, labels of another length, or labels that are not class indices.
#ifndef TANDEM_ML_WORKER_ZOO_KERNELS_H_
#define TANDEM_ML_WORKER_ZOO_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// REQUIRES: registry non-null (not owned). INVALID_ARGUMENT on a duplicate.
absl::Status RegisterZooKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_ZOO_KERNELS_H_
