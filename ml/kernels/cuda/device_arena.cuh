// Per-thread pool of reusable device buffers and a private CUDA stream, so
// that a warm CUDA call does no cudaMalloc/cudaFree. Internal to cuda/.
//
//   DeviceArena& arena = DeviceArena::ThisThread();
//   float* dq;
//   TANDEM_CUDA_TRY(arena.Get(0, count, &dq));   // slot 0, grows if needed
//   cudaMemcpyAsync(dq, q, bytes, cudaMemcpyHostToDevice, arena.stream());
//
// A slot is one device allocation that only grows (geometrically: at least
// twice the old capacity), so a sequence of calls of the same or smaller
// shapes allocates nothing after the first. Slot contents are undefined on
// Get and valid until the next Get of the same slot; every entry point uses
// slots 0, 1, ... for its own buffers and synchronises its stream before
// returning, so entry points on one thread may share slots.
//
// Thread safety: one arena per thread (thread_local), never shared, so no
// locking; each thread's work runs on its own non-blocking stream and
// threads do not serialise on the device. Buffers and the stream are freed
// at thread exit (or by Release). When the thread's current device changes,
// the arena frees everything and starts over on the new device.
#ifndef TANDEM_ML_KERNELS_CUDA_DEVICE_ARENA_CUH_
#define TANDEM_ML_KERNELS_CUDA_DEVICE_ARENA_CUH_

#include <cuda_runtime.h>

#include <cstddef>

namespace tandem::ml::kernels::cuda {

class DeviceArena {
 public:
  static constexpr int kSlots = 16;

  // The calling thread's arena, created on first use.
  static DeviceArena& ThisThread();

  DeviceArena() = default;
  ~DeviceArena() { Release(); }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // A buffer of at least `bytes` bytes (>= 1) for `slot` in [0, kSlots).
  // Creates the stream on first use. Returns cudaErrorInvalidValue for a bad
  // slot, or the cudaMalloc/cudaStreamCreate error.
  cudaError_t GetBytes(int slot, size_t bytes, void** out);
  template <typename T>
  cudaError_t Get(int slot, size_t count, T** out) {
    void* p = nullptr;
    const cudaError_t err = GetBytes(slot, count * sizeof(T), &p);
    *out = static_cast<T*>(p);
    return err;
  }

  // The thread's stream; valid after a successful GetBytes or Prepare.
  cudaStream_t stream() const { return stream_; }
  // Creates the stream (and binds the arena to the current device) without
  // allocating a buffer.
  cudaError_t Prepare();
  // Frees every buffer and the stream (errors ignored: also runs at exit).
  void Release();

 private:
  struct Slot {
    void* ptr = nullptr;
    size_t capacity = 0;
  };
  Slot slots_[kSlots];
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

}  // namespace tandem::ml::kernels::cuda

#endif  // TANDEM_ML_KERNELS_CUDA_DEVICE_ARENA_CUH_
