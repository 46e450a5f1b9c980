// CUDA XNOR-popcount scoring for Spotlight retrieval (ml/kernels/spotlight.h):
// one thread per key code, query codes staged in shared memory; 16 B per
// key for 128-bit codes, so the pass is bandwidth-bound.
#include <cuda_runtime.h>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_buffer.cuh"

namespace tandem::ml::kernels::cuda {
namespace {

constexpr int kMaxQueryWords = 4096;
constexpr int kThreads = 256;

__global__ void HammingKernel(const uint32_t* __restrict__ queries, int64_t num_queries,
                              const uint32_t* __restrict__ keys, int64_t num_keys, int64_t words,
                              int32_t* __restrict__ scores) {
  __shared__ uint32_t sq[kMaxQueryWords];
  for (int64_t i = threadIdx.x; i < num_queries * words; i += blockDim.x) sq[i] = queries[i];
  __syncthreads();
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= num_keys) return;
  const uint32_t* kj = keys + j * words;
  int32_t s = 0;
  for (int64_t w = 0; w < words; ++w) {
    const uint32_t kw = kj[w];
    for (int64_t g = 0; g < num_queries; ++g) s += __popc(~(sq[g * words + w] ^ kw));
  }
  scores[j] = s;
}

}  // namespace

int HammingScores(const uint32_t* queries, int64_t num_queries, const uint32_t* keys,
                  int64_t num_keys, int64_t words, int32_t* scores) {
  if (num_queries < 1 || num_keys < 1 || words < 1 || num_queries * words > kMaxQueryWords) {
    return -1;
  }
  DeviceBuffer<uint32_t> dq(num_queries * words), dk(num_keys * words);
  DeviceBuffer<int32_t> ds(num_keys);
  TANDEM_CUDA_TRY(dq.status());
  TANDEM_CUDA_TRY(dk.status());
  TANDEM_CUDA_TRY(ds.status());
  TANDEM_CUDA_TRY(cudaMemcpy(dq.get(), queries, num_queries * words * sizeof(uint32_t),
                             cudaMemcpyHostToDevice));
  TANDEM_CUDA_TRY(
      cudaMemcpy(dk.get(), keys, num_keys * words * sizeof(uint32_t), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((num_keys + kThreads - 1) / kThreads);
  HammingKernel<<<blocks, kThreads>>>(dq.get(), num_queries, dk.get(), num_keys, words, ds.get());
  TANDEM_CUDA_TRY(cudaGetLastError());
  TANDEM_CUDA_TRY(cudaDeviceSynchronize());
  TANDEM_CUDA_TRY(cudaMemcpy(scores, ds.get(), num_keys * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return 0;
}

}  // namespace tandem::ml::kernels::cuda
