// Worker kernels for distillation objectives (issue #9), CPU reference in
// ml/kernels/distill (see Capabilities for the typed signatures). Keep in
// sync with proto/worker.proto.
//   hdd.expmap0 / hdd.logmap0   Lorentz feature map and its inverse (HDD)
//   hdd.loss                    geodesic centroid distance + d/d synthetic
//   hdd.distill_step            one momentum-SGD step on synthetic samples
//   gld.graph                   InfiGFusion co-activation graph of logits
//   gld.loss                    sorted-strength GW surrogate + d/d student
//   sdpgo.feature_weights       proximal (soft-threshold) gradient weights
//   sdpgo.step                  SDPGO loss, gradients and refined history
//   sled.energy_loss            SLED energy-distance loss + d/d samples
// Wire tensors are float32; the kernels compute in float64 where the spec
// asks (HDD) and return float32. Every runner checks a per-request work and
// scratch cap before it allocates (INVALID_ARGUMENT "request too large").
#ifndef TANDEM_ML_WORKER_DISTILL_KERNELS_H_
#define TANDEM_ML_WORKER_DISTILL_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers the kernels above. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterDistillKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_DISTILL_KERNELS_H_
