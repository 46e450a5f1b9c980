// Worker kernels for training objectives and optimizers (issue #9), CPU
// reference in ml/kernels/training (see Capabilities for the typed
// signatures). Keep in sync with proto/worker.proto.
//   dana.plrf_curve             DANA / SGD-momentum risk curve on power-law random features
//   crossspectra.forward        CrossSpectra coefficients -> Delta W (L, P, d_out, d_in)
//   crossspectra.adjoint        dL/dDelta W -> dL/dcoefficients
//   prune.reweighted_gradient   reweighted score gradient from outdated sub-models
//   prune.project               projection onto the sparsity budget + top-k mask
//   prune.layer_mask            full probabilistic-mask pruning of one linear layer
// Every runner checks a per-request work and scratch cap before it
// allocates (INVALID_ARGUMENT "request too large").
#ifndef TANDEM_ML_WORKER_TRAINING_KERNELS_H_
#define TANDEM_ML_WORKER_TRAINING_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers the kernels above. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterTrainingKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_TRAINING_KERNELS_H_
