// Host-callable entry points of the CUDA kernels (ml/kernels/cuda/*.cu).
// Raw pointers and sizes only: no Eigen, absl or CUDA headers cross this
// boundary; the C++ wrappers (dusa.cc, spotlight.cc) validate and convert
// the int return codes (0 = success, > 0 = cudaError_t, < 0 = unsupported
// argument) into absl::Status. All pointers are host memory; each call
// copies its inputs into the calling thread's device arena
// (device_arena.cuh: buffers reused across calls, so a warm call does no
// cudaMalloc), runs on the thread's own stream and synchronises it before
// returning. Thread-safe: one arena and stream per thread, nothing else
// shared besides the CUDA context.
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

// Top k of the HammingScores scores, best first, ties towards the lower
// position (exactly HammingTopK's CPU order); selection runs on the device
// and only the k positions come back. REQUIRES: as HammingScores, plus
// 1 <= k <= num_keys < 2^31 (else -1).
int HammingTopK(const uint32_t* queries, int64_t num_queries, const uint32_t* keys,
                int64_t num_keys, int64_t words, int64_t k, int64_t* top_positions);

// Receives the compacted cache of AdaKvCompact once its size is known.
class CompactSink {
 public:
  virtual ~CompactSink() = default;
  // Returns host buffers for total_rows positions and total_rows x d floats
  // (keys, values; unused when AdaKvCompact got no k/v), or false to abort
  // (AdaKvCompact then returns -2).
  virtual bool Reserve(int64_t total_rows, int64_t** kept, float** keys, float** values) = 0;
};

// Ada-KV steps 2-4 (AllocateBudgets, SelectKept, CompactKvCache of
// ml/kernels/adakv.h) on the device: scores (hkv, l) without NaN, k/v
// (hkv, n, d), window w with l + w <= n, budget_prime >= 0, alpha in [0, 1].
// Writes counts, caps (hkv each) and cu_seqlens (hkv + 1), then the kept
// positions (per head ascending, heads concatenated) and gathered rows into
// the sink's buffers. Same results as the CPU reference (ties towards the
// lower (head, position)). With k or v null only the positions are computed
// (the sink's keys/values may then stay null; nothing of the cache is
// uploaded). Returns -1 on bad sizes (l < 1, hkv * l or n
// >= 2^31).
int AdaKvCompact(const float* scores, const float* k, const float* v, int64_t hkv, int64_t l,
                 int64_t n, int64_t d, int64_t window, int64_t budget_prime, double alpha,
                 int64_t* counts, int64_t* caps, int64_t* cu_seqlens, CompactSink* sink);

// One decode step over a compacted cache (CompactDecodeAttention of
// adakv.h): q (h, d), keys/values (cu_seqlens[hkv], d), query head i attends
// KV head i / (h / hkv). REQUIRES: 1 <= d <= kMaxHeadDim, h % hkv == 0,
// every head keeps >= 1 entry (else -1).
int CompactDecode(const float* q, int64_t h, int64_t d, const float* keys, const float* values,
                  const int64_t* cu_seqlens, int64_t hkv, float* out);

// Device-arena counters over all threads since process start.
struct ArenaStats {
  int64_t allocations = 0;      // cudaMalloc calls made by arenas
  int64_t bytes_allocated = 0;  // their total size
  int64_t bytes_live = 0;       // currently held by arenas
};
ArenaStats CudaArenaStats();
// Frees the calling thread's arena (buffers and stream); the next CUDA call
// on this thread allocates again.
void CudaArenaReleaseThisThread();

}  // namespace tandem::ml::kernels::cuda

#endif  // TANDEM_ML_KERNELS_CUDA_CUDA_KERNELS_H_
