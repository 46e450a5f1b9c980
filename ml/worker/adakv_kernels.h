// Worker kernels of Ada-KV (arXiv 2407.11550), see adakv_kernels.cc:
//   adakv.scores    SnapKV observation-window scores, pooled (H_kv, N - w)
//   adakv.compress  head-wise budgets with safeguard, flattened kept KV
//   adakv.decode    one decode step over the kept positions
// Each takes k and v from a KV cache named in the request, in place.
#ifndef TANDEM_ML_WORKER_ADAKV_KERNELS_H_
#define TANDEM_ML_WORKER_ADAKV_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers the three kernels. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterAdaKvKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_ADAKV_KERNELS_H_
