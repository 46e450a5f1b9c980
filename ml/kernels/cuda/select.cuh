// Exact segmented top-k selection on the device, shared by the Spotlight
// top-k (hamming.cu) and Ada-KV compaction (adakv.cu). Internal to cuda/.
//
// Every element i of segment s has a 64-bit key fn(s, i) (a KeyFn functor
// with `__device__ uint64_t operator()(int64_t s, int64_t i) const`), and the
// keys of a segment are distinct: callers append the reversed position to
// the score bits, key = (score_bits << pos_bits) | (len - 1 - i), so "larger
// key" means "higher score, then lower position", the CPU references' tie
// rule. Then the top k of a segment are exactly the keys >= its k-th largest
// key, with no tie handling left.
//
//   RadixSelect   finds that k-th largest key per segment (most significant
//                 digit first, 8 bits per pass: a shared-memory histogram of
//                 the keys that match the digits chosen so far, then one
//                 thread picks the next digit), all on the device, so k may
//                 itself live in device memory (Ada-KV's per-head caps).
//   Compact       writes the positions (and keys) of the selected elements in
//                 position order: per-chunk counts, a per-segment exclusive
//                 scan, then an order-preserving ballot scan per chunk.
// Everything is enqueued on the given stream; nothing synchronises.
#ifndef TANDEM_ML_KERNELS_CUDA_SELECT_CUH_
#define TANDEM_ML_KERNELS_CUDA_SELECT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::ml::kernels::cuda::select {

inline constexpr int kThreads = 256;
inline constexpr int64_t kChunk = 4096;  // elements per block

// Per segment: the threshold (the digits found so far, then the k-th largest
// key) and the rank still to find among keys matching it (0: done).
struct State {
  uint64_t threshold;
  int64_t remaining;
};

inline int BitWidth(uint64_t x) {
  int bits = 0;
  for (; x != 0; x >>= 1) ++bits;
  return bits;
}

inline int64_t NumChunks(int64_t len) { return (len + kChunk - 1) / kChunk; }

// Order-preserving map of a non-NaN float to uint32 (-0 and +0 map alike,
// as they compare equal on the CPU).
__device__ __forceinline__ uint32_t OrderedFloatBits(float f) {
  const uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// Host launchers of the non-template kernels (select.cu).
// st[s] = {0, k} with k = k_dev[s] (or k_host); k <= 0 selects nothing,
// k >= seg_len everything.
cudaError_t LaunchInit(State* st, int64_t segs, int64_t seg_len, const int64_t* k_dev,
                       int64_t k_host, cudaStream_t stream);
// Picks the digit at `shift` of each segment's threshold and clears hist.
cudaError_t LaunchDigit(int shift, State* st, unsigned* hist, int64_t segs, cudaStream_t stream);
// In place exclusive scan of each segment's chunk counts.
cudaError_t LaunchScanChunks(unsigned* counts, int64_t chunks, int64_t segs, cudaStream_t stream);

template <class KeyFn>
__global__ void HistKernel(KeyFn fn, int64_t seg_len, int shift, const State* st, unsigned* hist) {
  const int64_t s = blockIdx.y;
  const State state = st[s];
  if (state.remaining == 0) return;
  __shared__ unsigned h[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const uint64_t hi_mask = shift + 8 >= 64 ? 0 : (~0ull << (shift + 8));
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t end = begin + kChunk < seg_len ? begin + kChunk : seg_len;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const uint64_t key = fn(s, i);
    if ((key & hi_mask) == state.threshold) atomicAdd(&h[(key >> shift) & 255u], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    if (h[i] != 0) atomicAdd(&hist[s * 256 + i], h[i]);
  }
}

// k-th largest key of each of segs segments of seg_len elements; k from
// k_dev[s] when k_dev is not null, else k_host. key_bits in [1, 63]: the
// keys' significant bits. st: segs States, hist: segs * 256 counters.
template <class KeyFn>
cudaError_t RadixSelect(const KeyFn& fn, int64_t segs, int64_t seg_len, int key_bits,
                        const int64_t* k_dev, int64_t k_host, State* st, unsigned* hist,
                        cudaStream_t stream) {
  cudaError_t err = LaunchInit(st, segs, seg_len, k_dev, k_host, stream);
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(hist, 0, segs * 256 * sizeof(unsigned), stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(NumChunks(seg_len)), static_cast<unsigned>(segs));
  for (int shift = ((key_bits + 7) / 8) * 8 - 8; shift >= 0; shift -= 8) {
    HistKernel<<<grid, kThreads, 0, stream>>>(fn, seg_len, shift, st, hist);
    err = LaunchDigit(shift, st, hist, segs, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

__device__ __forceinline__ unsigned BlockSum(unsigned x, unsigned* scratch) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  unsigned total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

// counts[s * gridDim.x + chunk] = selected elements of that chunk; the
// threshold of segment s is st[s * st_stride] (st_stride 0: one shared).
template <class KeyFn>
__global__ void CountKernel(KeyFn fn, int64_t seg_len, const State* st, int st_stride,
                            unsigned* counts) {
  const int64_t s = blockIdx.y;
  const uint64_t threshold = st[s * st_stride].threshold;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t end = begin + kChunk < seg_len ? begin + kChunk : seg_len;
  unsigned c = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) c += fn(s, i) >= threshold;
  __shared__ unsigned scratch[kThreads / 32];
  const unsigned total = BlockSum(c, scratch);
  if (threadIdx.x == 0) counts[s * gridDim.x + blockIdx.x] = total;
}

template <class KeyFn>
__global__ void WriteKernel(KeyFn fn, int64_t seg_len, const State* st, const unsigned* offsets,
                            const int64_t* out_offsets, int64_t* out_pos, uint64_t* out_keys) {
  const int64_t s = blockIdx.y;
  const uint64_t threshold = st[s].threshold;
  int64_t base =
      (out_offsets != nullptr ? out_offsets[s] : 0) + offsets[s * gridDim.x + blockIdx.x];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t end = begin + kChunk < seg_len ? begin + kChunk : seg_len;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ unsigned warp_counts[kThreads / 32];
  for (int64_t t0 = begin; t0 < end; t0 += kThreads) {
    const int64_t i = t0 + threadIdx.x;
    const uint64_t key = i < end ? fn(s, i) : 0;
    const bool selected = i < end && key >= threshold;
    const unsigned ballot = __ballot_sync(0xffffffffu, selected);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    unsigned before = 0, total = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      total += warp_counts[w];
    }
    if (selected) {
      const int64_t o = base + before + __popc(ballot & ((1u << lane) - 1u));
      out_pos[o] = i;
      if (out_keys != nullptr) out_keys[o] = key;
    }
    base += total;
    __syncthreads();
  }
}

// Positions (segment-local) of the keys >= each segment's threshold, in
// position order, at out_pos[out_offsets[s] + rank] (out_offsets null: 0);
// keys likewise into out_keys when not null. counts: segs * NumChunks
// scratch. Run after RadixSelect with the same fn and st.
template <class KeyFn>
cudaError_t Compact(const KeyFn& fn, int64_t segs, int64_t seg_len, const State* st,
                    unsigned* counts, const int64_t* out_offsets, int64_t* out_pos,
                    uint64_t* out_keys, cudaStream_t stream) {
  const int64_t chunks = NumChunks(seg_len);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(segs));
  CountKernel<<<grid, kThreads, 0, stream>>>(fn, seg_len, st, 1, counts);
  const cudaError_t err = LaunchScanChunks(counts, chunks, segs, stream);
  if (err != cudaSuccess) return err;
  WriteKernel<<<grid, kThreads, 0, stream>>>(fn, seg_len, st, counts, out_offsets, out_pos,
                                             out_keys);
  return cudaGetLastError();
}

}  // namespace tandem::ml::kernels::cuda::select

#endif  // TANDEM_ML_KERNELS_CUDA_SELECT_CUH_
