// Worker kernels of the search / evolution / geometry / sequence family
// (issue #10; kernels_research.md sections 6, 9, 15). Keep in sync with
// proto/worker.proto (generic KernelRequest; names and signatures below):
//   trajmamba.scan       selective state-space scan (chunked SSD; CUDA)
//   trajmamba.encode     TrajMamba trajectory embeddings (weights from weight_seed)
//   trajmamba.mask       mask-generator keep scores and hard key points
//   frappe.allocation    FraPPE optimal allocation (Frank-Wolfe) and Pareto set
//   frappe.simulate      FraPPE vs uniform sample complexity on a Gaussian bandit
//   partpacker.pack      PartPacker dual volume packing of a voxel label grid
#ifndef TANDEM_ML_WORKER_SEARCH_KERNELS_H_
#define TANDEM_ML_WORKER_SEARCH_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers every kernel above. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterSearchKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_SEARCH_KERNELS_H_
