// Host-callable entry points of the search-family CUDA kernels
// (ml/kernels/search/cuda/*.cu). Raw host pointers and sizes only: no Eigen,
// absl or CUDA headers cross this boundary. The C++ wrapper (ssm_scan.cc)
// validates shapes and converts the int return code (0 = success,
// > 0 = cudaError_t, < 0 = unsupported argument) into absl::Status. Each
// call copies into the calling thread's device arena (ml/kernels/cuda/
// device_arena.cuh: buffers reused across calls), runs on the thread's
// stream and synchronises it. Thread-safe (one arena per thread).
#ifndef TANDEM_ML_KERNELS_SEARCH_CUDA_SEARCH_CUDA_H_
#define TANDEM_ML_KERNELS_SEARCH_CUDA_SEARCH_CUDA_H_

#include <cstdint>

namespace tandem::ml::kernels::search::cuda {

// Largest state dimension N the scan kernel keeps in registers
// (32 lanes x kStatesPerLane states per head-dim channel).
inline constexpr int64_t kMaxScanStateDim = 512;

// The selective scan of ssm_scan.h (sequential recurrence), same layouts:
// x (batch, L, H, P), dt (batch, L, H), b/c (batch, L, N), a/d/dt_bias (H),
// h0 (batch, H, P, N) or nullptr for zeros; writes y (batch, L, H, P) and
// h_out (batch, H, P, N). REQUIRES: all sizes >= 1, N <= kMaxScanStateDim
// (else returns -1).
int SelectiveScan(const float* x, const float* dt, const float* a, const float* b,
                  const float* c, const float* d, const float* dt_bias, const float* h0,
                  int64_t batch, int64_t length, int64_t heads, int64_t head_dim,
                  int64_t state_dim, float* y, float* h_out);

}  // namespace tandem::ml::kernels::search::cuda

#endif  // TANDEM_ML_KERNELS_SEARCH_CUDA_SEARCH_CUDA_H_
