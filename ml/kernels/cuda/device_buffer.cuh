// RAII device buffer for the .cu translation units. Internal to cuda/.
#ifndef TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_
#define TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_

#include <cuda_runtime.h>

#include <cstddef>

namespace tandem::ml::kernels::cuda {

// Owns one cudaMalloc allocation; check status() after construction.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) { status_ = cudaMalloc(&ptr_, count * sizeof(T) + 1); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  cudaError_t status() const { return status_; }

 private:
  void* ptr_ = nullptr;
  cudaError_t status_;
};

}  // namespace tandem::ml::kernels::cuda

#define TANDEM_CUDA_TRY(expr)                        \
  do {                                               \
    const cudaError_t tandem_cuda_err_ = (expr);     \
    if (tandem_cuda_err_ != cudaSuccess) {           \
      return static_cast<int>(tandem_cuda_err_);     \
    }                                                \
  } while (false)

#endif  // TANDEM_ML_KERNELS_CUDA_DEVICE_BUFFER_CUH_
