// Selective state-space scan of Mamba-2 (scalar A per head, "SSD"), the
// sequence mixer of TrajMamba (arXiv 2510.17545; PTrajM's Mamba-2 block,
// kernels_research.md section 15):
//
//   delta_t = softplus(dt_t + dt_bias)                     (per head)
//   h_t     = exp(delta_t A) h_{t-1} + delta_t x_t B_t^T    (h_t in R^{P x N})
//   y_t     = h_t C_t + D x_t
//
// Shapes (row-major): x (batch, L, H, P), dt (batch, L, H), B and C
// (batch, L, N) shared by all heads (one group, as in PTrajM), A, D and
// dt_bias (H). A must be negative (A = -exp(a_log)), so every decay is <= 1.
//
// Two CPU algorithms give the same result:
//   chunk == 0  the naive recurrence above, O(L H P N), sequential in t;
//   chunk  > 0  the chunked SSD form (Dao & Gu 2024, "Transformers are SSMs"):
//               inside a chunk of Q steps y = (L o C B^T) X with the decay
//               mask L[t][s] = exp(a_t - a_s) delta_s (a = cumsum(delta A)),
//               chunk states S = X^T diag(exp(a_end - a_s) delta_s) B are
//               passed between chunks sequentially, and the carried state
//               adds diag(exp(a_t)) C H_prev^T. O(L H (Q (N + P) + P N)),
//               parallel over (batch, head, chunk) with oneTBB.
// The CUDA version (cuda/ssm_scan.cu) is the sequential recurrence with one
// thread group per (batch, head, p) lane; see SelectiveScan's backend.
//
// Thread safety: pure functions over the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_SEARCH_SSM_SCAN_H_
#define TANDEM_ML_KERNELS_SEARCH_SSM_SCAN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::search {

struct ScanDims {
  int64_t batch = 0;
  int64_t length = 0;     // L
  int64_t heads = 0;      // H
  int64_t head_dim = 0;   // P
  int64_t state_dim = 0;  // N
};

// Read-only views of the scan inputs; sizes as in the header comment.
// h0 is the initial state (batch, H, P, N) or empty for zeros.
template <typename T>
struct ScanArgs {
  absl::Span<const T> x, dt, a, b, c, d, dt_bias, h0;
};

// Largest sizes accepted (so every product fits in int64 and a request
// cannot describe an absurd scan): each dim <= 2^20, chunk <= 4096.
inline constexpr int64_t kMaxScanDim = int64_t{1} << 20;
inline constexpr int64_t kMaxScanChunk = 4096;

// Runs the scan on raw buffers (float or double; instantiated for both).
// y must have batch*L*H*P elements, h_out batch*H*P*N (the final state).
// chunk = 0 selects the naive recurrence. Returns INVALID_ARGUMENT when a
// dimension is outside [1, kMaxScanDim], chunk outside [0, kMaxScanChunk],
// a span has the wrong size, or some A >= 0.
template <typename T>
absl::Status SelectiveScanRaw(const ScanDims& dims, const ScanArgs<T>& args, int64_t chunk,
                              absl::Span<T> y, absl::Span<T> h_out);

struct ScanOutput {
  Tensor y;      // (batch, L, H, P)
  Tensor state;  // (batch, H, P, N), the state after the last step
};

struct ScanOptions {
  int64_t chunk = 64;              // 0 = naive recurrence (CPU only)
  Backend backend = Backend::kCpu;
  const Tensor* initial_state = nullptr;  // (batch, H, P, N) or null; not owned
};

// Tensor front end. INVALID_ARGUMENT on any shape mismatch (naming the
// tensor), as SelectiveScanRaw, or non-finite inputs; UNAVAILABLE for
// Backend::kCuda without CUDA; INTERNAL when the CUDA kernel fails.
absl::StatusOr<ScanOutput> SelectiveScan(const Tensor& x, const Tensor& dt, const Tensor& a,
                                         const Tensor& b, const Tensor& c, const Tensor& d,
                                         const Tensor& dt_bias, const ScanOptions& options = {});

// Floating-point operations of one scan: 6 L H P N for the state update and
// readout (the naive count; the chunked form does more, see the header).
double SelectiveScanFlops(const ScanDims& dims);
// Bytes the scan must move at least once: inputs and outputs in float32.
double SelectiveScanBytes(const ScanDims& dims);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_SSM_SCAN_H_
