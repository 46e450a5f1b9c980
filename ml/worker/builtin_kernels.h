// The paper kernels tandem-worker serves (see Capabilities for the typed
// signatures). Keep in sync with proto/worker.proto.
//   attention.dense        dense SDPA reference (GQA, causal)
//   dusa.forward           DuSA two-stage sparse attention (CUDA)
//   cat.mix / cat.forward  CAT circular-convolutional attention (FFT/gather)
//   adakv.scores / adakv.compress   SnapKV scoring + Ada-KV allocation/compaction
//   spotlight.hash / spotlight.topk (CUDA) / spotlight.ranking_loss
//   ren.forward / ren.merge         REN region tokens from point prompts
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
