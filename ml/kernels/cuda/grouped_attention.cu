// CUDA grouped dense attention for DuSA's two stages (see ml/kernels/dusa.h).
// One warp per query row; each lane owns d/32 (rounded up) dims; keys of the
// query's group are streamed with an online softmax (running max and sum, as
// in FlashAttention, Dao et al. 2022), so no N x N score matrix exists.
#include <cuda_runtime.h>

#include <cmath>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_arena.cuh"
#include "ml/kernels/cuda/device_buffer.cuh"

namespace tandem::ml::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = kMaxHeadDim / 32;

__global__ void GroupedAttentionKernel(const float* __restrict__ q, const float* __restrict__ k,
                                       const float* __restrict__ v, float* __restrict__ out,
                                       int64_t bh, int64_t n, int64_t d, int64_t groups,
                                       int64_t group_len, int64_t group_mul, int64_t step,
                                       float scale) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t rows = bh * groups * group_len;
  if (row >= rows) return;
  const int64_t slice = row / (groups * group_len);
  const int64_t g = (row / group_len) % groups;
  const int64_t m = row % group_len;
  const int64_t base = slice * n * d;
  const float* qi = q + base + (g * group_mul + m * step) * d;
  float qr[kMaxPerLane], acc[kMaxPerLane];
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    qr[t] = c < d ? qi[c] * scale : 0.0f;
    acc[t] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t j = 0; j < group_len; ++j) {
    const int64_t tok = g * group_mul + j * step;
    const float* kj = k + base + tok * d;
    float dot = 0.0f;
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < d) dot += qr[t] * kj[c];
    }
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float new_max = fmaxf(running_max, dot);
    const float correction = expf(running_max - new_max);
    const float p = expf(dot - new_max);
    running_sum = running_sum * correction + p;
    const float* vj = v + base + tok * d;
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < d) acc[t] = acc[t] * correction + p * vj[c];
    }
    running_max = new_max;
  }
  float* oi = out + base + (g * group_mul + m * step) * d;
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    if (c < d) oi[c] = acc[t] / running_sum;
  }
}

}  // namespace

int GroupedAttention(const float* q, const float* k, const float* v, float* out, int64_t bh,
                     int64_t n, int64_t d, int64_t groups, int64_t group_len, int64_t group_mul,
                     int64_t step) {
  if (d < 1 || d > kMaxHeadDim || bh < 1 || n < 1 || groups * group_len != n) return -1;
  const size_t count = static_cast<size_t>(bh * n * d), bytes = count * sizeof(float);
  DeviceArena& arena = DeviceArena::ThisThread();
  float *dq, *dk, *dv, *dout;
  TANDEM_CUDA_TRY(arena.Get(0, count, &dq));
  TANDEM_CUDA_TRY(arena.Get(1, count, &dk));
  TANDEM_CUDA_TRY(arena.Get(2, count, &dv));
  TANDEM_CUDA_TRY(arena.Get(3, count, &dout));
  const cudaStream_t stream = arena.stream();
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dq, q, bytes, cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dk, k, bytes, cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dv, v, bytes, cudaMemcpyHostToDevice, stream));
  const int64_t rows = bh * n;
  const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  GroupedAttentionKernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
      dq, dk, dv, dout, bh, n, d, groups, group_len, group_mul, step,
      1.0f / sqrtf(static_cast<float>(d)));
  TANDEM_CUDA_TRY(cudaGetLastError());
  TANDEM_CUDA_TRY(cudaMemcpyAsync(out, dout, bytes, cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace tandem::ml::kernels::cuda
