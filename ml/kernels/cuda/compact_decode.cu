// Decode attention over an Ada-KV compacted cache (CompactDecodeAttention of
// ml/kernels/adakv.h), split-K as in flash-decoding: block (split, head)
// covers one contiguous slice of its KV head's entries with 4 warps, each
// warp streaming every 4th entry with an online softmax (lanes own d/32
// dims, as grouped_attention.cu); the warps merge in shared memory into one
// partial (max, sum, unnormalised output) per split, and a second kernel
// merges the splits of each head.
#include <cuda_runtime.h>

#include <cmath>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_arena.cuh"
#include "ml/kernels/cuda/device_buffer.cuh"

namespace tandem::ml::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = kMaxHeadDim / 32;
constexpr int64_t kMinEntriesPerSplit = 128;
constexpr int64_t kMaxSplits = 64;

// Weight of a partial with running max m under the merged max: 0 for an
// empty partial (m = -inf).
__device__ __forceinline__ float MergeWeight(float m, float merged) {
  return m == -INFINITY ? 0.0f : expf(m - merged);
}

__global__ void PartialKernel(const float* __restrict__ q, const float* __restrict__ keys,
                              const float* __restrict__ values,
                              const int64_t* __restrict__ cu_seqlens, int64_t group, int64_t d,
                              float scale, float* __restrict__ part_acc,
                              float* __restrict__ part_ml) {
  const int64_t head = blockIdx.y, split = blockIdx.x, splits = gridDim.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t kv = head / group;
  const int64_t off = cu_seqlens[kv], len = cu_seqlens[kv + 1] - off;
  const int64_t per = (len + splits - 1) / splits;
  const int64_t begin = split * per, end = begin + per < len ? begin + per : len;
  const float* qh = q + head * d;
  float qr[kMaxPerLane], acc[kMaxPerLane];
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    qr[t] = c < d ? qh[c] * scale : 0.0f;
    acc[t] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t j = begin + warp; j < end; j += kWarps) {
    const float* kj = keys + (off + j) * d;
    float dot = 0.0f;
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < d) dot += qr[t] * kj[c];
    }
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float new_max = fmaxf(running_max, dot);
    const float correction = expf(running_max - new_max);
    const float p = expf(dot - new_max);
    running_sum = running_sum * correction + p;
    const float* vj = values + (off + j) * d;
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < d) acc[t] = acc[t] * correction + p * vj[c];
    }
    running_max = new_max;
  }
  __shared__ float s_max[kWarps], s_sum[kWarps], s_acc[kWarps][kMaxHeadDim];
  if (lane == 0) {
    s_max[warp] = running_max;
    s_sum[warp] = running_sum;
  }
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    if (c < d) s_acc[warp][c] = acc[t];
  }
  __syncthreads();
  float merged = -INFINITY;
  for (int w = 0; w < kWarps; ++w) merged = fmaxf(merged, s_max[w]);
  const int64_t part = head * splits + split;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a += s_acc[w][c] * MergeWeight(s_max[w], merged);
    part_acc[part * d + c] = a;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += s_sum[w] * MergeWeight(s_max[w], merged);
    part_ml[2 * part] = merged;
    part_ml[2 * part + 1] = sum;
  }
}

__global__ void MergeKernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                            int64_t splits, int64_t d, float* __restrict__ out) {
  const int64_t head = blockIdx.x;
  const float* ml = part_ml + 2 * head * splits;
  float merged = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) merged = fmaxf(merged, ml[2 * s]);
  float sum = 0.0f;
  for (int64_t s = 0; s < splits; ++s) sum += ml[2 * s + 1] * MergeWeight(ml[2 * s], merged);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float a = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      a += part_acc[(head * splits + s) * d + c] * MergeWeight(ml[2 * s], merged);
    }
    out[head * d + c] = a / sum;
  }
}

}  // namespace

int CompactDecode(const float* q, int64_t h, int64_t d, const float* keys, const float* values,
                  const int64_t* cu_seqlens, int64_t hkv, float* out) {
  if (d < 1 || d > kMaxHeadDim || hkv < 1 || h < 1 || h % hkv != 0 || h > 65535 ||
      cu_seqlens[0] != 0) {
    return -1;
  }
  int64_t max_len = 0;
  for (int64_t i = 0; i < hkv; ++i) {
    const int64_t len = cu_seqlens[i + 1] - cu_seqlens[i];
    if (len < 1) return -1;
    max_len = len > max_len ? len : max_len;
  }
  const int64_t total = cu_seqlens[hkv];
  int64_t splits = (max_len + kMinEntriesPerSplit - 1) / kMinEntriesPerSplit;
  splits = splits > kMaxSplits ? kMaxSplits : splits;
  DeviceArena& arena = DeviceArena::ThisThread();
  float *dq, *dkeys, *dvalues, *part_acc, *part_ml, *dout;
  int64_t* dcu;
  TANDEM_CUDA_TRY(arena.Get(0, h * d, &dq));
  TANDEM_CUDA_TRY(arena.Get(1, total * d, &dkeys));
  TANDEM_CUDA_TRY(arena.Get(2, total * d, &dvalues));
  TANDEM_CUDA_TRY(arena.Get(3, hkv + 1, &dcu));
  TANDEM_CUDA_TRY(arena.Get(4, h * splits * d, &part_acc));
  TANDEM_CUDA_TRY(arena.Get(5, 2 * h * splits, &part_ml));
  TANDEM_CUDA_TRY(arena.Get(6, h * d, &dout));
  const cudaStream_t stream = arena.stream();
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dq, q, h * d * sizeof(float), cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(dkeys, keys, total * d * sizeof(float), cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(dvalues, values, total * d * sizeof(float), cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dcu, cu_seqlens, (hkv + 1) * sizeof(int64_t),
                                  cudaMemcpyHostToDevice, stream));
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(h));
  PartialKernel<<<grid, 32 * kWarps, 0, stream>>>(
      dq, dkeys, dvalues, dcu, h / hkv, d, 1.0f / sqrtf(static_cast<float>(d)), part_acc, part_ml);
  TANDEM_CUDA_TRY(cudaGetLastError());
  MergeKernel<<<static_cast<unsigned>(h), 128, 0, stream>>>(part_acc, part_ml, splits, d, dout);
  TANDEM_CUDA_TRY(cudaGetLastError());
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(out, dout, h * d * sizeof(float), cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace tandem::ml::kernels::cuda
