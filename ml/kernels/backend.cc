#include "ml/kernels/backend.h"

#include "absl/strings/str_cat.h"

#ifdef TANDEM_HAVE_CUDA
#include "ml/kernels/cuda/cuda_kernels.h"
#endif

namespace tandem::ml::kernels {

absl::string_view BackendName(Backend backend) {
  return backend == Backend::kCuda ? "cuda" : "cpu";
}

bool CudaCompiledIn() {
#ifdef TANDEM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool CudaDeviceAvailable() {
#ifdef TANDEM_HAVE_CUDA
  static const bool available = cuda::DeviceCount() > 0;
  return available;
#else
  return false;
#endif
}

std::string ActiveBackendDescription() {
#ifdef TANDEM_HAVE_CUDA
  if (CudaDeviceAvailable()) return absl::StrCat("cuda (", cuda::DeviceName(), ")");
  return "cpu (CUDA compiled in, no usable device)";
#else
  return "cpu (built without CUDA)";
#endif
}

absl::StatusOr<Backend> ChooseBackend(absl::string_view requested, bool kernel_has_cuda) {
  if (requested.empty()) {
    return kernel_has_cuda && CudaDeviceAvailable() ? Backend::kCuda : Backend::kCpu;
  }
  if (requested == "cpu") return Backend::kCpu;
  if (requested == "cuda") {
    if (!kernel_has_cuda) return absl::UnavailableError("kernel has no CUDA implementation");
    if (!CudaCompiledIn()) return absl::UnavailableError("built without CUDA");
    if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device present");
    return Backend::kCuda;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", requested, "' (expected \"\", \"cpu\" or \"cuda\")"));
}

}  // namespace tandem::ml::kernels
