// Host-callable entry points of the CUDA kernels (ml/kernels/cuda/*.cu).
// Raw pointers and sizes only: no Eigen, absl or CUDA headers cross this
// boundary; the C++ wrappers (dusa.cc, spotlight.cc) validate and convert
// the int return codes (0 = success, > 0 = cudaError_t, < 0 = unsupported
// argument) into absl::Status. All pointers are host memory; each call
// allocates, copies, runs and synchronises (simple and safe, not tuned for
// transfer overlap). Thread-safe (no shared state besides the CUDA context).
#ifndef TANDEM_ML_KERNELS_CUDA_CUDA_KERNELS_H_
#define TANDEM_ML_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cstdint>
#include <string>

namespace tandem::ml::kernels::cuda {

// Number of usable devices; 0 on any runtime error (e.g. 35, no driver).
int DeviceCount();
// Name of device 0, or "" without one.
std::string DeviceName();

// Largest head dim GroupedAttention supports.
inline constexpr int64_t kMaxHeadDim = 256;

// For each of bh (batch*head) slices of n tokens x d floats and each group
// g < groups, tokens t(g, m) = g * group_mul + m * step for m < group_len
// attend each other densely (softmax(q k^T / sqrt d) v); out has q's layout.
// REQUIRES: 1 <= d <= kMaxHeadDim (else returns -1); the groups tile [0, n).
int GroupedAttention(const float* q, const float* k, const float* v, float* out, int64_t bh,
                     int64_t n, int64_t d, int64_t groups, int64_t group_len, int64_t group_mul,
                     int64_t step);

// scores[j] = sum_{g < num_queries} sum_{w < words} popcount(~(q[g,w] ^ k[j,w])).
// REQUIRES: num_queries * words <= 4096 (else returns -1), all counts >= 1.
int HammingScores(const uint32_t* queries, int64_t num_queries, const uint32_t* keys,
                  int64_t num_keys, int64_t words, int32_t* scores);

}  // namespace tandem::ml::kernels::cuda

#endif  // TANDEM_ML_KERNELS_CUDA_CUDA_KERNELS_H_
