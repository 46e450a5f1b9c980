// absl/Tensor-level entry points of CUDA paths whose CPU API has no Backend
// parameter (Ada-KV, ml/kernels/adakv.h), and the device-arena counters.
// Always built: without CUDA compiled in, or without a device, the kernels
// return UNAVAILABLE and the counters read zero.
//
//   TANDEM_ASSIGN_OR_RETURN(AdaKvCudaResult r,
//                           AdaKvCompactCuda(scores, k, v, window, budget - window, alpha));
//   TANDEM_ASSIGN_OR_RETURN(Tensor out, CompactDecodeAttentionCuda(q, r.cache));
//
// Thread-safe: each thread uses its own device arena and stream
// (device_arena.cuh).
#ifndef TANDEM_ML_KERNELS_CUDA_CUDA_OPS_H_
#define TANDEM_ML_KERNELS_CUDA_CUDA_OPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

// Process-wide device-arena counters (cuda_kernels.h ArenaStats).
struct CudaArenaCounters {
  int64_t allocations = 0;      // cudaMalloc calls made by arenas so far
  int64_t bytes_allocated = 0;  // their total size
  int64_t bytes_live = 0;       // currently held
};
CudaArenaCounters CudaArenaStats();
// Frees the calling thread's device arena (no-op without CUDA).
void CudaArenaRelease();

struct AdaKvCudaResult {
  BudgetAllocation allocation;
  CompactKv cache;
};

// Where AdaKvCompactCuda copies the kept rows out of k/v. kHost (default):
// the device selects, the host gathers with CompactKvCache, and only the
// scores travel to the device (the right choice while caches live in host
// memory). kDevice: k/v are uploaded and gathered by a kernel (the path of a
// device-resident cache; here it pays the whole cache's upload).
enum class AdaKvGather { kHost, kDevice };

// AllocateBudgets(scores, budget_prime, alpha) and SelectKept(scores, caps,
// window) on the device, then CompactKvCache(k, v, kept) as `gather` says,
// with identical results (kept positions and counts exact, rows copied bit
// for bit).
// scores (H_kv, L), k/v (H_kv, N, d) with L + window <= N. INVALID_ARGUMENT
// as the CPU steps (bad shapes, NaN score, budget_prime < 0, alpha outside
// [0, 1]); UNAVAILABLE without a device; INTERNAL on a CUDA error.
absl::StatusOr<AdaKvCudaResult> AdaKvCompactCuda(const Tensor& scores, const Tensor& k,
                                                 const Tensor& v, int64_t window,
                                                 int64_t budget_prime, double alpha,
                                                 AdaKvGather gather = AdaKvGather::kHost);

// AdaKvCompress with the SnapKV scoring on the CPU (SnapKvScores) and the
// compaction above. Errors as AdaKvCompress and AdaKvCompactCuda.
absl::StatusOr<CompactKv> AdaKvCompressCuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AdaKvOptions& opt,
                                            AdaKvGather gather = AdaKvGather::kHost);

// CompactDecodeAttention on the device (within float rounding of the CPU
// reference). INVALID_ARGUMENT as the CPU version or for d > 256;
// UNAVAILABLE without a device; INTERNAL on a CUDA error.
absl::StatusOr<Tensor> CompactDecodeAttentionCuda(const Tensor& q, const CompactKv& cache);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_CUDA_CUDA_OPS_H_
