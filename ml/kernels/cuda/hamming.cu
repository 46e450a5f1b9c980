// CUDA XNOR-popcount scoring for Spotlight retrieval (ml/kernels/spotlight.h):
// one thread per key code, query codes staged in shared memory; 16 B per
// key for 128-bit codes, so the pass is bandwidth-bound. HammingTopK then
// selects on the device (select.cuh: radix select on (score, reversed
// position) keys, order-preserving compaction, a CUB radix sort of the k
// winners) and copies back only the k positions.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "ml/kernels/cuda/cuda_kernels.h"
#include "ml/kernels/cuda/device_arena.cuh"
#include "ml/kernels/cuda/device_buffer.cuh"
#include "ml/kernels/cuda/select.cuh"

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

// Key of position j: score in the high bits, n - 1 - j below, so larger
// keys are higher scores, then lower positions (HammingTopK's CPU order).
struct ScoreKey {
  const int32_t* scores;
  int64_t n;
  int pos_bits;
  __device__ uint64_t operator()(int64_t /*segment*/, int64_t j) const {
    return (static_cast<uint64_t>(scores[j]) << pos_bits) | static_cast<uint64_t>(n - 1 - j);
  }
};

__global__ void DecodePositionsKernel(const uint64_t* keys, int64_t count, int64_t n,
                                      uint64_t pos_mask, int64_t* positions) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) positions[i] = n - 1 - static_cast<int64_t>(keys[i] & pos_mask);
}

bool BadArgs(int64_t num_queries, int64_t num_keys, int64_t words) {
  return num_queries < 1 || num_keys < 1 || words < 1 || num_queries * words > kMaxQueryWords;
}

// Uploads the codes into arena slots 0 and 1 and scores them into slot 2.
int ScoreOnDevice(DeviceArena& arena, const uint32_t* queries, int64_t num_queries,
                  const uint32_t* keys, int64_t num_keys, int64_t words, int32_t** scores) {
  uint32_t *dq, *dk;
  TANDEM_CUDA_TRY(arena.Get(0, num_queries * words, &dq));
  TANDEM_CUDA_TRY(arena.Get(1, num_keys * words, &dk));
  TANDEM_CUDA_TRY(arena.Get(2, num_keys, scores));
  const cudaStream_t stream = arena.stream();
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dq, queries, num_queries * words * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_TRY(cudaMemcpyAsync(dk, keys, num_keys * words * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, stream));
  const unsigned blocks = static_cast<unsigned>((num_keys + kThreads - 1) / kThreads);
  HammingKernel<<<blocks, kThreads, 0, stream>>>(dq, num_queries, dk, num_keys, words, *scores);
  TANDEM_CUDA_TRY(cudaGetLastError());
  return 0;
}

}  // namespace

int HammingScores(const uint32_t* queries, int64_t num_queries, const uint32_t* keys,
                  int64_t num_keys, int64_t words, int32_t* scores) {
  if (BadArgs(num_queries, num_keys, words)) return -1;
  DeviceArena& arena = DeviceArena::ThisThread();
  int32_t* ds;
  if (const int rc = ScoreOnDevice(arena, queries, num_queries, keys, num_keys, words, &ds);
      rc != 0) {
    return rc;
  }
  const cudaStream_t stream = arena.stream();
  TANDEM_CUDA_TRY(
      cudaMemcpyAsync(scores, ds, num_keys * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

int HammingTopK(const uint32_t* queries, int64_t num_queries, const uint32_t* keys,
                int64_t num_keys, int64_t words, int64_t k, int64_t* top_positions) {
  if (BadArgs(num_queries, num_keys, words) || k < 1 || k > num_keys ||
      num_keys > (int64_t{1} << 31) - 1) {
    return -1;
  }
  DeviceArena& arena = DeviceArena::ThisThread();
  int32_t* ds;
  if (const int rc = ScoreOnDevice(arena, queries, num_queries, keys, num_keys, words, &ds);
      rc != 0) {
    return rc;
  }
  const cudaStream_t stream = arena.stream();
  const int pos_bits = num_keys > 1 ? select::BitWidth(static_cast<uint64_t>(num_keys - 1)) : 1;
  const int key_bits = select::BitWidth(static_cast<uint64_t>(32 * num_queries * words)) + pos_bits;
  const ScoreKey fn{ds, num_keys, pos_bits};
  select::State* st;
  unsigned *hist, *chunk_counts;
  int64_t* positions;
  uint64_t *selected, *sorted;
  TANDEM_CUDA_TRY(arena.Get(3, 1, &st));
  TANDEM_CUDA_TRY(arena.Get(4, 256, &hist));
  TANDEM_CUDA_TRY(arena.Get(5, select::NumChunks(num_keys), &chunk_counts));
  TANDEM_CUDA_TRY(arena.Get(6, k, &positions));
  TANDEM_CUDA_TRY(arena.Get(7, k, &selected));
  TANDEM_CUDA_TRY(arena.Get(8, k, &sorted));
  TANDEM_CUDA_TRY(select::RadixSelect(fn, 1, num_keys, key_bits, nullptr, k, st, hist, stream));
  TANDEM_CUDA_TRY(
      select::Compact(fn, 1, num_keys, st, chunk_counts, nullptr, positions, selected, stream));
  // The k selected keys are distinct: sorting them descending gives score
  // descending, ties by ascending position.
  size_t temp_bytes = 0;
  TANDEM_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(
      nullptr, temp_bytes, selected, sorted, static_cast<int>(k), 0, key_bits, stream));
  void* temp;
  TANDEM_CUDA_TRY(arena.GetBytes(9, temp_bytes + 1, &temp));
  TANDEM_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(
      temp, temp_bytes, selected, sorted, static_cast<int>(k), 0, key_bits, stream));
  DecodePositionsKernel<<<static_cast<unsigned>((k + 255) / 256), 256, 0, stream>>>(
      sorted, k, num_keys, (uint64_t{1} << pos_bits) - 1, positions);
  TANDEM_CUDA_TRY(cudaGetLastError());
  TANDEM_CUDA_TRY(cudaMemcpyAsync(top_positions, positions, k * sizeof(int64_t),
                                  cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace tandem::ml::kernels::cuda
