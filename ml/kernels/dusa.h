// DuSA: Dual-Stage Sparse Attention (Wu, Cao, Xu, Ran, Che, Zhu, Yan,
// NeurIPS 2025, https://openreview.net/forum?id=tM5mjMfFmS).
//
// The paper states stage 1 = intra-block sparse attention (local inductive
// bias) and stage 2 = inter-block sparse attention (long range), each
// FlashAttention-friendly. Its exact stage coupling is not public, so this is
// a RECONSTRUCTION [I] (kernels_research.md section 3, axial two-hop reading):
//   X1 = Attn_intra(Q, K, V):  token i attends the tokens of its own block
//        (blocks of b consecutive tokens);
//   O  = Attn_inter(Q, K, X1): token i attends the tokens with the same
//        in-block offset (i mod b) in every block, with values X1.
// Every pair (i, j) is joined by a two-hop path, at O(N (b + N/b) d) FLOPs.
// Special cases that hold exactly: b = N gives dense SDPA (stage 2 sees one
// token); b = 1 gives dense SDPA (stage 1 returns V).
//
// Shapes: q, k, v (B, H, N, d), N divisible by b; output (B, H, N, d).
// Thread safety: pure functions over the global oneTBB arena / the GPU.
#ifndef TANDEM_ML_KERNELS_DUSA_H_
#define TANDEM_ML_KERNELS_DUSA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

enum class DusaStage { kIntraBlock, kInterBlock };

// One stage alone (its output equals dense SDPA with the block-diagonal or the
// strided mask). Returns INVALID_ARGUMENT unless q, k, v are rank 4 of equal
// shape and 1 <= block_size divides N; UNAVAILABLE when backend is kCuda and
// no device is present; INTERNAL on a CUDA failure.
absl::StatusOr<Tensor> DusaStageForward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        int64_t block_size, DusaStage stage,
                                        Backend backend = Backend::kCpu);

// Both stages (see the header comment). Errors as DusaStageForward.
absl::StatusOr<Tensor> DusaForward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   int64_t block_size, Backend backend = Backend::kCpu);

// FLOPs of DusaForward counted as 4 * (b + N/b) * N * d per (batch, head).
double DusaFlops(int64_t batch_heads, int64_t n, int64_t d, int64_t block_size);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_DUSA_H_
