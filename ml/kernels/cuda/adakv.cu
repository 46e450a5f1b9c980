// Ada-KV compaction on the device (AllocateBudgets + SelectKept +
// CompactKvCache of ml/kernels/adakv.h), with the exact tie rules of the
// CPU reference:
//  1. global top-(hkv B') over all heads' scores: radix select (select.cuh)
//     on keys (ordered float bits, reversed flat index), so ties go to the
//     lower (head, position); then per-head counts of keys >= threshold;
//  2. one thread turns counts into caps (half-to-even rounding, no FMA
//     contraction) and cu_seqlens;
//  3. per-head radix select of the top cap_h (reversed position as tie key),
//     order-preserving compaction into each head's slice of the kept list,
//     the window positions appended;
//  4. a warp per kept row gathers its key and value rows (only when k/v are
//     given: with host-resident caches the caller may gather on the host
//     instead and skip uploading the whole cache).
// Only the small counts/caps/cu_seqlens, then the kept positions and the
// gathered rows come back to the host.
#include <cuda_runtime.h>

#include <cmath>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_arena.cuh"
#include "ml/kernels/cuda/device_buffer.cuh"
#include "ml/kernels/cuda/select.cuh"

namespace tandem::ml::kernels::cuda {
namespace {

constexpr int64_t kMaxLen = (int64_t{1} << 31) - 1;

// Element i of segment s is scores[s * seg_stride + i]; ties by position i
// within the segment (len elements).
struct FloatKey {
  const float* scores;
  int64_t len;
  int64_t seg_stride;
  int pos_bits;
  __device__ uint64_t operator()(int64_t s, int64_t i) const {
    return (static_cast<uint64_t>(select::OrderedFloatBits(scores[s * seg_stride + i]))
            << pos_bits) |
           static_cast<uint64_t>(len - 1 - i);
  }
};

// The flat (one-segment) key viewed as hkv segments of l elements.
struct FlatAsHeads {
  FloatKey flat;
  int64_t l;
  __device__ uint64_t operator()(int64_t s, int64_t i) const { return flat(0, s * l + i); }
};

int PosBits(int64_t len) { return len > 1 ? select::BitWidth(static_cast<uint64_t>(len - 1)) : 1; }

__global__ void CapsKernel(const unsigned* chunk_counts, int64_t chunks, int64_t hkv, int64_t l,
                           int64_t window, bool keep_all, int64_t budget_prime, double alpha,
                           int64_t* counts, int64_t* caps, int64_t* cu_seqlens) {
  const double floor_tokens = floor(__dmul_rn(static_cast<double>(budget_prime), alpha));
  const double keep = __dsub_rn(1.0, alpha);
  cu_seqlens[0] = 0;
  for (int64_t h = 0; h < hkv; ++h) {
    int64_t c = l, cap = l;
    if (!keep_all) {
      c = 0;
      for (int64_t i = 0; i < chunks; ++i) c += chunk_counts[h * chunks + i];
      const double x = __dadd_rn(__dmul_rn(static_cast<double>(c), keep), floor_tokens);
      cap = static_cast<int64_t>(nearbyint(x));
      cap = cap < 0 ? 0 : (cap > l ? l : cap);
    }
    counts[h] = c;
    caps[h] = cap;
    cu_seqlens[h + 1] = cu_seqlens[h] + cap + window;
  }
}

__global__ void WindowKernel(const int64_t* caps, const int64_t* cu_seqlens, int64_t l,
                             int64_t window, int64_t* kept) {
  const int64_t h = blockIdx.y;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < window) kept[cu_seqlens[h] + caps[h] + t] = l + t;
}

// Block (x, h): 8 warps, a warp per kept row of head h.
__global__ void GatherKernel(const float* __restrict__ k, const float* __restrict__ v,
                             const int64_t* __restrict__ kept,
                             const int64_t* __restrict__ cu_seqlens, int64_t n, int64_t d,
                             float* __restrict__ keys, float* __restrict__ values) {
  const int64_t h = blockIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t row = cu_seqlens[h] + j;
  if (row >= cu_seqlens[h + 1]) return;
  const int64_t src = (h * n + kept[row]) * d;
  for (int64_t c = threadIdx.x % 32; c < d; c += 32) {
    keys[row * d + c] = k[src + c];
    values[row * d + c] = v[src + c];
  }
}

}  // namespace

int AdaKvCompact(const float* scores, const float* k, const float* v, int64_t hkv, int64_t l,
                 int64_t n, int64_t d, int64_t window, int64_t budget_prime, double alpha,
                 int64_t* counts, int64_t* caps, int64_t* cu_seqlens, CompactSink* sink) {
  if (hkv < 1 || hkv > 65535 || l < 1 || d < 1 || window < 0 || l + window > n ||
      budget_prime < 0 || !(alpha >= 0.0 && alpha <= 1.0) || hkv * l > kMaxLen || n > kMaxLen ||
      sink == nullptr) {
    return -1;
  }
  DeviceArena& arena = DeviceArena::ThisThread();
  const int64_t chunks = select::NumChunks(l);
  const bool gather = k != nullptr && v != nullptr;
  float *ds, *dk = nullptr, *dv = nullptr;
  select::State* st;
  unsigned *hist, *chunk_counts;
  int64_t* small;  // counts (hkv), caps (hkv), cu_seqlens (hkv + 1)
  TANDEM_CUDA_TRY(arena.Get(0, hkv * l, &ds));
  if (gather) {
    TANDEM_CUDA_TRY(arena.Get(1, hkv * n * d, &dk));
    TANDEM_CUDA_TRY(arena.Get(2, hkv * n * d, &dv));
  }
  TANDEM_CUDA_TRY(arena.Get(3, hkv, &st));
  TANDEM_CUDA_TRY(arena.Get(4, hkv * 256, &hist));
  TANDEM_CUDA_TRY(arena.Get(5, hkv * chunks, &chunk_counts));
  TANDEM_CUDA_TRY(arena.Get(6, 3 * hkv + 1, &small));
  int64_t *dcounts = small, *dcaps = small + hkv, *dcu = small + 2 * hkv;
  const cudaStream_t stream = arena.stream();
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(ds, scores, hkv * l * sizeof(float), cudaMemcpyHostToDevice, stream));
  const bool keep_all = budget_prime >= l;
  if (!keep_all) {
    const FloatKey flat{ds, hkv * l, 0, PosBits(hkv * l)};
    TANDEM_CUDA_TRY(select::RadixSelect(flat, 1, hkv * l, 32 + flat.pos_bits, nullptr,
                                        hkv * budget_prime, st, hist, stream));
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(hkv));
    select::CountKernel<<<grid, select::kThreads, 0, stream>>>(FlatAsHeads{flat, l}, l, st, 0,
                                                               chunk_counts);
    TANDEM_CUDA_TRY(cudaGetLastError());
  }
  CapsKernel<<<1, 1, 0, stream>>>(chunk_counts, chunks, hkv, l, window, keep_all, budget_prime,
                                  alpha, dcounts, dcaps, dcu);
  TANDEM_CUDA_TRY(cudaGetLastError());
  const FloatKey per_head{ds, l, l, PosBits(l)};
  TANDEM_CUDA_TRY(
      select::RadixSelect(per_head, hkv, l, 32 + per_head.pos_bits, dcaps, 0, st, hist, stream));
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(counts, dcounts, hkv * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(caps, dcaps, hkv * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(cudaMemcpyAsync(cu_seqlens, dcu, (hkv + 1) * sizeof(int64_t),
                                  cudaMemcpyDeviceToHost, stream));
  if (gather) {
    TANDEM_CUDA_TRY(
        cudaMemcpyAsync(dk, k, hkv * n * d * sizeof(float), cudaMemcpyHostToDevice, stream));
    TANDEM_CUDA_TRY(
        cudaMemcpyAsync(dv, v, hkv * n * d * sizeof(float), cudaMemcpyHostToDevice, stream));
  }
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  const int64_t total = cu_seqlens[hkv];
  int64_t max_rows = 0;
  for (int64_t h = 0; h < hkv; ++h) {
    const int64_t rows = cu_seqlens[h + 1] - cu_seqlens[h];
    max_rows = rows > max_rows ? rows : max_rows;
  }
  int64_t* kept_out = nullptr;
  float *keys_out = nullptr, *values_out = nullptr;
  if (!sink->Reserve(total, &kept_out, &keys_out, &values_out)) return -2;
  if (total == 0) return 0;
  int64_t* kept;
  float *gathered_k = nullptr, *gathered_v = nullptr;
  TANDEM_CUDA_TRY(arena.Get(7, total, &kept));
  if (gather) {
    TANDEM_CUDA_TRY(arena.Get(8, total * d, &gathered_k));
    TANDEM_CUDA_TRY(arena.Get(9, total * d, &gathered_v));
  }
  TANDEM_CUDA_TRY(select::Compact(per_head, hkv, l, st, chunk_counts, dcu, kept, nullptr, stream));
  if (window > 0) {
    const dim3 grid(static_cast<unsigned>((window + 255) / 256), static_cast<unsigned>(hkv));
    WindowKernel<<<grid, 256, 0, stream>>>(dcaps, dcu, l, window, kept);
    TANDEM_CUDA_TRY(cudaGetLastError());
  }
  if (gather && max_rows > 0) {
    const dim3 grid(static_cast<unsigned>((max_rows + 7) / 8), static_cast<unsigned>(hkv));
    GatherKernel<<<grid, 256, 0, stream>>>(dk, dv, kept, dcu, n, d, gathered_k, gathered_v);
    TANDEM_CUDA_TRY(cudaGetLastError());
  }
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(kept_out, kept, total * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  if (gather) {
    TANDEM_CUDA_TRY(cudaMemcpyAsync(keys_out, gathered_k, total * d * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_TRY(cudaMemcpyAsync(values_out, gathered_v, total * d * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
  }
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace tandem::ml::kernels::cuda
