// Training kernels whose step updates a loaded model in place
// (ml/worker/model_store.h), so that a client of the worker can train a
// model over RPC and read it back with ReadModel:
//   spotlight.train_step        Spotlight ranking loss + AdamW step of the
//                               hash MLP; the AdamW moments belong to the
//                               model entry (created on its first step)
//   trajmamba.mask_train_step   one SGD step of TrajMamba's mask generator
//                               distilled to the teacher embedding
// Without a model both are stateless: the weights come as inputs and the
// updated weights go back as outputs (AdamW then starts from zero moments).
// With a model the weights neither travel in nor out, every step bumps the
// model's version, and a step whose result is not finite leaves the model
// unchanged (OUT_OF_RANGE). Other kernels train models through the
// registry's generic path (kernel_registry.h): hdd.distill_step (a
// "tensors" model holding synthetic and velocity), sdpgo.step (q_hist) and
// eco.insert (a "cnn" model's flat weights); crossspectra.forward and
// eco.extract read models that way.
#ifndef TANDEM_ML_WORKER_MODEL_KERNELS_H_
#define TANDEM_ML_WORKER_MODEL_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// REQUIRES: registry non-null (not owned). INVALID_ARGUMENT on a duplicate.
absl::Status RegisterModelKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_MODEL_KERNELS_H_
