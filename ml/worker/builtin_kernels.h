// The paper kernels tandem-worker serves (see Capabilities for the typed
// signatures). Keep in sync with proto/worker.proto.
//   attention.dense        dense SDPA reference (GQA, causal)
//   dusa.forward           DuSA two-stage sparse attention (CUDA)
//   cat.mix / cat.forward  CAT circular-convolutional attention (FFT/gather)
//   adakv.scores / adakv.compress   SnapKV scoring + Ada-KV allocation/compaction
//   adakv.decode           one decode step over the compacted cache
//   spotlight.hash / spotlight.topk (CUDA) / spotlight.ranking_loss
//   ren.forward / ren.merge         REN region tokens from point prompts
//   tensor.copy            y = x (float32, rank 1): the transfer's own cost
// and the families of training_kernels.h, distill_kernels.h,
// search_kernels.h, eco_kernels.h and model_kernels.h (training steps on
// loaded models: spotlight.train_step, trajmamba.mask_train_step).
// Kernels with weights take them from a loaded model when the request names
// one (KernelInfo.model_kinds; ml/worker/model_store.h).
#ifndef TANDEM_ML_WORKER_BUILTIN_KERNELS_H_
#define TANDEM_ML_WORKER_BUILTIN_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers every kernel above. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterBuiltinKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_BUILTIN_KERNELS_H_
