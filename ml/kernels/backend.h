// Where a kernel runs. Every kernel has a CPU reference (Eigen/oneTBB),
// always built; some have a CUDA implementation (ml/kernels/cuda/*.cu),
// built when nvcc is found and usable only when a GPU is present.
//
//   auto b = ChooseBackend("", /*kernel_has_cuda=*/true);  // best available
//   TANDEM_LOG(INFO) << "running on " << BackendName(*b);
//
// Thread-safe: device detection runs once and is cached.
#ifndef TANDEM_ML_KERNELS_BACKEND_H_
#define TANDEM_ML_KERNELS_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::ml::kernels {

enum class Backend { kCpu, kCuda };

// "cpu" or "cuda".
absl::string_view BackendName(Backend backend);

// True when this build carries CUDA code (TANDEM_HAVE_CUDA).
bool CudaCompiledIn();
// True when CUDA is compiled in and cudaGetDeviceCount reports >= 1 device.
// Any runtime error (e.g. 35, no driver) counts as "no GPU".
bool CudaDeviceAvailable();
// One line for logs, e.g. "cuda (NVIDIA H200)" or "cpu (no CUDA device: ...)".
std::string ActiveBackendDescription();

// Resolves a requested backend name for a kernel.
//   ""     -> kCuda when kernel_has_cuda and a device is present, else kCpu
//             (the clean fallback);
//   "cpu"  -> kCpu;
//   "cuda" -> kCuda, or UNAVAILABLE when the kernel has no CUDA version,
//             CUDA is not compiled in, or no device is present.
// Returns INVALID_ARGUMENT for any other name.
absl::StatusOr<Backend> ChooseBackend(absl::string_view requested, bool kernel_has_cuda);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_BACKEND_H_
