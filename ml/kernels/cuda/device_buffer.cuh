// TANDEM_CUDA_TRY for the .cu translation units. Internal to cuda/.
#ifndef TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_
#define TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_

#include <cuda_runtime.h>

// Device memory comes from the per-thread arena (device_arena.cuh); this
// header keeps the error-propagation macro of the .cu files.
#define TANDEM_CUDA_TRY(expr)                        \
  do {                                               \
    const cudaError_t tandem_cuda_err_ = (expr);     \
    if (tandem_cuda_err_ != cudaSuccess) {           \
      return static_cast<int>(tandem_cuda_err_);     \
    }                                                \
  } while (false)

#endif  // TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_
