// Worker kernels of ECO learngenes (Feng et al., "Evolving Core Knowledge for
// Efficient Transfer", NeurIPS 2025; GTL arXiv 2401.08139;
// kernels_research.md section 1), CPU only, on the ml/eco library. Keep in
// sync with proto/worker.proto (generic KernelRequest; names below):
//   eco.extract         importance-ranked circuit of a trained CNN and its
//                       kept sub-tensors (SelectCircuit + ExtractLearngene)
//   eco.insert          a learngene written into a new CNN's flat weights,
//                       the circuit isolated (InsertLearngene)
//   eco.generate_step   Alg. 1 mutation of a learngene: one offspring of
//                       ECO's generation loop (MutateLearngene, seeded)
//
// The architecture is ml::MakeCnn's (gene layers conv1, conv2, fc1; head
// out), given by the integer params channels, height, width, classes,
// conv1, conv2, hidden. Wire form of a learngene:
//   masks  uint8 [conv1 + conv2 + hidden], 0/1, each layer keeps >= 1 unit
//   gene   float32 [n], per gene layer the kept rows x kept columns
//          (row-major), then the kept biases, layers concatenated in order
// (Learngene::weights flattened). The flat weights are Model::Flatten() of
// that CNN. Errors: bad shapes, byte values, counts, params -> INVALID_ARGUMENT
// (after the registry's dtype/rank/NaN checks); an architecture whose
// parameter count exceeds kMaxScratch -> INVALID_ARGUMENT "request too large".
// Thread safety: the runners keep no state.
#ifndef TANDEM_ML_WORKER_ECO_KERNELS_H_
#define TANDEM_ML_WORKER_ECO_KERNELS_H_

#include "absl/status/status.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

// Registers the kernels above. REQUIRES: registry non-null (not owned).
// INVALID_ARGUMENT if one of the names is already registered.
absl::Status RegisterEcoKernels(KernelRegistry* registry);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_ECO_KERNELS_H_
