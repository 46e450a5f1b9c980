// CUDA selective scan (the recurrence of ssm_scan.h, TrajMamba's mixer).
//
// Layout of the work: one block per (p tile, head, batch); inside a block
// each head-dim channel p owns kLanes = 16 consecutive threads (two channels
// per warp), and each thread keeps states n = lane + 16 j (j < 32) of the
// P x N state in registers, so N <= 512. Per time step a thread updates its
// states h = exp(delta A) h + delta x B, accumulates h C, and the 16 lanes of
// a channel sum their partial readouts with __shfl_xor_sync. B_t, C_t and
// delta_t of kTile steps are staged in shared memory by the whole block.
// Time stays sequential (as in the naive recurrence): the parallelism is
// batch x H x P x 16 threads, enough for TrajMamba-sized batches.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ml/kernels/cuda/device_arena.cuh"
#include "ml/kernels/search/cuda/search_cuda.h"

namespace tandem::ml::kernels::search::cuda {
namespace {

constexpr int kLanes = 16;
constexpr int kStatesPerLane = 32;
constexpr int kChannels = 16;  // channels per block: 256 threads
constexpr int kTile = 8;       // time steps staged per shared-memory fill
static_assert(kLanes * kStatesPerLane == kMaxScanStateDim, "state capacity");

__global__ void ScanKernel(const float* __restrict__ x, const float* __restrict__ dt,
                           const float* __restrict__ a, const float* __restrict__ b,
                           const float* __restrict__ c, const float* __restrict__ d,
                           const float* __restrict__ dt_bias, const float* __restrict__ h0,
                           int64_t L, int64_t H, int64_t P, int64_t N, float* __restrict__ y,
                           float* __restrict__ h_out) {
  extern __shared__ float smem[];
  float* sb = smem;
  float* sc = smem + kTile * N;
  float* sdelta = sc + kTile * N;
  const int64_t bi = blockIdx.z, hi = blockIdx.y;
  const int lane = threadIdx.x % kLanes;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kChannels + threadIdx.x / kLanes;
  const bool active = p < P;
  const int64_t state_base = ((bi * H + hi) * P + p) * N;
  float h[kStatesPerLane];
#pragma unroll
  for (int j = 0; j < kStatesPerLane; ++j) {
    const int64_t n = lane + static_cast<int64_t>(j) * kLanes;
    h[j] = (active && n < N && h0 != nullptr) ? h0[state_base + n] : 0.0f;
  }
  const float av = a[hi], dv = d[hi], bias = dt_bias[hi];
  for (int64_t t0 = 0; t0 < L; t0 += kTile) {
    const int64_t q = (L - t0) < kTile ? (L - t0) : kTile;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < q * N; i += blockDim.x) {
      const int64_t row = bi * L + t0 + i / N;
      sb[i] = b[row * N + i % N];
      sc[i] = c[row * N + i % N];
    }
    if (threadIdx.x < q) {
      const float v = dt[(bi * L + t0 + threadIdx.x) * H + hi] + bias;
      sdelta[threadIdx.x] = v > 20.0f ? v : log1pf(expf(v));
    }
    __syncthreads();
    for (int64_t tt = 0; tt < q; ++tt) {
      const float delta = sdelta[tt];
      const float decay = expf(delta * av);
      const int64_t xi = ((bi * L + t0 + tt) * H + hi) * P + p;
      const float xv = active ? x[xi] : 0.0f;
      const float dx = delta * xv;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kStatesPerLane; ++j) {
        const int64_t n = lane + static_cast<int64_t>(j) * kLanes;
        if (n < N) {
          h[j] = decay * h[j] + dx * sb[tt * N + n];
          acc += h[j] * sc[tt * N + n];
        }
      }
      // Lanes of one channel are 16 aligned threads of a warp.
      for (int off = kLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (active && lane == 0) y[xi] = acc + dv * xv;
    }
  }
  if (!active) return;
#pragma unroll
  for (int j = 0; j < kStatesPerLane; ++j) {
    const int64_t n = lane + static_cast<int64_t>(j) * kLanes;
    if (n < N) h_out[state_base + n] = h[j];
  }
}

}  // namespace

#define TANDEM_SEARCH_CUDA_TRY(expr)             \
  do {                                           \
    const cudaError_t err_ = (expr);             \
    if (err_ != cudaSuccess) return static_cast<int>(err_); \
  } while (false)

int SelectiveScan(const float* x, const float* dt, const float* a, const float* b,
                  const float* c, const float* d, const float* dt_bias, const float* h0,
                  int64_t batch, int64_t length, int64_t heads, int64_t head_dim,
                  int64_t state_dim, float* y, float* h_out) {
  if (batch < 1 || length < 1 || heads < 1 || head_dim < 1 || state_dim < 1 ||
      state_dim > kMaxScanStateDim || batch > 65535 || heads > 65535) {
    return -1;
  }
  const size_t rows = static_cast<size_t>(batch * length);
  const size_t nx = rows * heads * head_dim, ndt = rows * heads, nb = rows * state_dim;
  const size_t nh = static_cast<size_t>(batch * heads * head_dim * state_dim);
  // Buffers come from the calling thread's device arena (reused across
  // calls: no cudaMalloc once warm) and the work runs on its stream.
  namespace kc = ::tandem::ml::kernels::cuda;
  kc::DeviceArena& arena = kc::DeviceArena::ThisThread();
  float *dx, *ddt, *dparams, *db, *dc, *dh0, *dy, *dh;
  TANDEM_SEARCH_CUDA_TRY(arena.Get(0, nx, &dx));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(1, ndt, &ddt));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(2, 3 * static_cast<size_t>(heads), &dparams));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(3, nb, &db));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(4, nb, &dc));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(5, h0 != nullptr ? nh : 1, &dh0));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(6, nx, &dy));
  TANDEM_SEARCH_CUDA_TRY(arena.Get(7, nh, &dh));
  float *da = dparams, *dd = dparams + heads, *dbias = dparams + 2 * heads;
  const cudaStream_t stream = arena.stream();
  const auto up = [stream](float* dst, const float* src, size_t n) {
    return cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream);
  };
  TANDEM_SEARCH_CUDA_TRY(up(dx, x, nx));
  TANDEM_SEARCH_CUDA_TRY(up(ddt, dt, ndt));
  TANDEM_SEARCH_CUDA_TRY(up(da, a, heads));
  TANDEM_SEARCH_CUDA_TRY(up(db, b, nb));
  TANDEM_SEARCH_CUDA_TRY(up(dc, c, nb));
  TANDEM_SEARCH_CUDA_TRY(up(dd, d, heads));
  TANDEM_SEARCH_CUDA_TRY(up(dbias, dt_bias, heads));
  if (h0 != nullptr) TANDEM_SEARCH_CUDA_TRY(up(dh0, h0, nh));
  const dim3 grid(static_cast<unsigned>((head_dim + kChannels - 1) / kChannels),
                  static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  const size_t smem = (2 * kTile * state_dim + kTile) * sizeof(float);
  ScanKernel<<<grid, kChannels * kLanes, smem, stream>>>(dx, ddt, da, db, dc, dd, dbias,
                                                         h0 != nullptr ? dh0 : nullptr, length,
                                                         heads, head_dim, state_dim, dy, dh);
  TANDEM_SEARCH_CUDA_TRY(cudaGetLastError());
  TANDEM_SEARCH_CUDA_TRY(
      cudaMemcpyAsync(y, dy, nx * sizeof(float), cudaMemcpyDeviceToHost, stream));
  TANDEM_SEARCH_CUDA_TRY(
      cudaMemcpyAsync(h_out, dh, nh * sizeof(float), cudaMemcpyDeviceToHost, stream));
  TANDEM_SEARCH_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace tandem::ml::kernels::search::cuda
