// DeviceArena (device_arena.cuh) and the process-wide allocation counters
// behind CudaArenaStats (cuda_kernels.h).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_arena.cuh"

namespace tandem::ml::kernels::cuda {
namespace {

std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_bytes_allocated{0};
std::atomic<int64_t> g_bytes_live{0};

constexpr size_t kMinCapacity = 4096;

}  // namespace

DeviceArena& DeviceArena::ThisThread() {
  thread_local DeviceArena arena;
  return arena;
}

cudaError_t DeviceArena::Prepare() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device != device_) {
    Release();
    device_ = device;
  }
  if (stream_ == nullptr) {
    err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      stream_ = nullptr;
      return err;
    }
  }
  return cudaSuccess;
}

cudaError_t DeviceArena::GetBytes(int slot, size_t bytes, void** out) {
  *out = nullptr;
  if (slot < 0 || slot >= kSlots) return cudaErrorInvalidValue;
  cudaError_t err = Prepare();
  if (err != cudaSuccess) return err;
  Slot& s = slots_[slot];
  if (bytes > s.capacity) {
    const size_t grown = std::max({bytes, 2 * s.capacity, kMinCapacity});
    if (s.ptr != nullptr) {
      // The stream may still use the old buffer (an earlier call of this
      // thread always synchronised, but be safe for future async callers).
      cudaStreamSynchronize(stream_);
      cudaFree(s.ptr);
      g_bytes_live -= static_cast<int64_t>(s.capacity);
      s.ptr = nullptr;
      s.capacity = 0;
    }
    err = cudaMalloc(&s.ptr, grown);
    if (err != cudaSuccess) {
      s.ptr = nullptr;
      return err;
    }
    s.capacity = grown;
    ++g_allocations;
    g_bytes_allocated += static_cast<int64_t>(grown);
    g_bytes_live += static_cast<int64_t>(grown);
  }
  *out = s.ptr;
  return cudaSuccess;
}

void DeviceArena::Release() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (Slot& s : slots_) {
    if (s.ptr != nullptr) {
      cudaFree(s.ptr);
      g_bytes_live -= static_cast<int64_t>(s.capacity);
    }
    s = Slot{};
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
  device_ = -1;
}

ArenaStats CudaArenaStats() {
  return ArenaStats{g_allocations.load(), g_bytes_allocated.load(), g_bytes_live.load()};
}

void CudaArenaReleaseThisThread() { DeviceArena::ThisThread().Release(); }

}  // namespace tandem::ml::kernels::cuda
