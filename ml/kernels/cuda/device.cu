// Device discovery for the CUDA backend.
#include <cuda_runtime.h>

#include "ml/kernels/cuda/cuda_kernels.h"

namespace tandem::ml::kernels::cuda {

int DeviceCount() {
  int count = 0;  // left unwritten by the runtime when no driver is present
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count < 0 ? 0 : count;
}

std::string DeviceName() {
  if (DeviceCount() == 0) return "";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return prop.name;
}

}  // namespace tandem::ml::kernels::cuda
