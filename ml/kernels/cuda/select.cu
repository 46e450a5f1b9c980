// Non-template kernels of the device top-k selection (select.cuh).
#include "ml/kernels/cuda/select.cuh"

namespace tandem::ml::kernels::cuda::select {
namespace {

// k <= 0 selects nothing (threshold above every key: keys use <= 63 bits),
// k >= len everything.
__global__ void InitKernel(State* st, int64_t segs, int64_t seg_len, const int64_t* k_dev,
                           int64_t k_host) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= segs) return;
  const int64_t k = k_dev != nullptr ? k_dev[s] : k_host;
  if (k <= 0) {
    st[s] = State{~0ull, 0};
  } else if (k >= seg_len) {
    st[s] = State{0, 0};
  } else {
    st[s] = State{0, k};
  }
}

// One block of 256 threads per segment; clears the histogram for the next pass.
__global__ void DigitKernel(int shift, State* st, unsigned* hist) {
  const int64_t s = blockIdx.x;
  __shared__ unsigned h[256];
  h[threadIdx.x] = hist[s * 256 + threadIdx.x];
  hist[s * 256 + threadIdx.x] = 0;
  __syncthreads();
  if (threadIdx.x != 0) return;
  State state = st[s];
  if (state.remaining == 0) return;
  int64_t above = 0;
  for (int b = 255; b >= 0; --b) {
    if (above + h[b] >= state.remaining) {
      state.threshold |= static_cast<uint64_t>(b) << shift;
      state.remaining -= above;
      break;
    }
    above += h[b];
  }
  if (shift == 0) state.remaining = 0;
  st[s] = state;
}

// In place exclusive scan of each segment's chunk counts; one thread per segment.
__global__ void ScanChunksKernel(unsigned* counts, int64_t chunks, int64_t segs) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= segs) return;
  unsigned run = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const unsigned x = counts[s * chunks + c];
    counts[s * chunks + c] = run;
    run += x;
  }
}

}  // namespace

cudaError_t LaunchInit(State* st, int64_t segs, int64_t seg_len, const int64_t* k_dev,
                       int64_t k_host, cudaStream_t stream) {
  InitKernel<<<static_cast<unsigned>((segs + 255) / 256), 256, 0, stream>>>(st, segs, seg_len,
                                                                            k_dev, k_host);
  return cudaGetLastError();
}

cudaError_t LaunchDigit(int shift, State* st, unsigned* hist, int64_t segs, cudaStream_t stream) {
  DigitKernel<<<static_cast<unsigned>(segs), 256, 0, stream>>>(shift, st, hist);
  return cudaGetLastError();
}

cudaError_t LaunchScanChunks(unsigned* counts, int64_t chunks, int64_t segs, cudaStream_t stream) {
  ScanChunksKernel<<<static_cast<unsigned>((segs + 255) / 256), 256, 0, stream>>>(counts, chunks,
                                                                                  segs);
  return cudaGetLastError();
}

}  // namespace tandem::ml::kernels::cuda::select
