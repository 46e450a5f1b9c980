// REN: Region Encoder Network (Savya et al., arXiv 2505.18153): region tokens
// from point prompts by cross-attention over frozen patch features
// (kernels_research.md section 10).
//
//   pe(p) = [sin(2 pi (2p - 1) G), cos(2 pi (2p - 1) G)],  p in [0,1]^2,
//           G (2, D/2) Gaussian (random Fourier features)
//   kv = F^T + pe(patch centres);  e = pe(point / image size);  q = e W_p + b_p
//   per layer l:  q <- q + e;  x = LN(q);
//                 a = MHA(x, kv) with per-head LayerNorm on q and k (QK-norm,
//                     no affine), scale (D/H)^-1/2;  x = a + q;
//                 q = LN(MLP(LN(x))) + x,  MLP = Linear(D,2D) GELU Linear(2D,D)
//   tokens = LN(q) W_out
// In the last layer the values are the raw kv (not projected) and, as a
// RECONSTRUCTION [I], the output projection is skipped there too, so the
// attention result is a convex combination of (position-encoded) features.
// LN = LayerNorm with eps 1e-5 and the layer's affine (gamma, beta).
// Shapes: features (D, Hp, Wp) (channels first, as DINOv2 maps), points
// (n_p, 2) pixel (x, y); outputs tokens (n_p, D) and the last layer's
// attention maps (H, n_p, Hp Wp).
// Thread safety: pure functions over the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_REN_H_
#define TANDEM_ML_KERNELS_REN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

struct RenLayerWeights {
  Tensor ln_q_gamma, ln_q_beta;      // (D)
  Tensor w_q, w_k, w_v, w_o;         // (D, D), x W convention
  Tensor ln_in_gamma, ln_in_beta;    // (D), LN before the MLP
  Tensor w1, b1, w2, b2;             // (D, 2D), (2D), (2D, D), (D)
  Tensor ln_out_gamma, ln_out_beta;  // (D), LN after the MLP
};

struct RenWeights {
  int64_t dim = 0;    // D
  int64_t heads = 0;  // H, D % H == 0
  Tensor fourier;     // G (2, D/2)
  Tensor w_p, b_p;    // prompt projection (D, D), (D)
  std::vector<RenLayerWeights> layers;
  Tensor ln_f_gamma, ln_f_beta, w_out;  // (D), (D), (D, D)
  // Gaussian weights with std 1/sqrt(fan_in), G ~ N(0, 1), LN gamma = 1 +
  // N(0, 0.1^2), beta ~ N(0, 0.1^2), from a fixed seed. INVALID_ARGUMENT
  // unless D, H, layers >= 1, D even and D % H == 0.
  static absl::StatusOr<RenWeights> Random(int64_t dim, int64_t heads, int64_t num_layers,
                                           uint64_t seed);
};

// INVALID_ARGUMENT unless every tensor of w has the shape above.
absl::Status ValidateRenWeights(const RenWeights& w);

// Random Fourier encoding of normalised coordinates p (n, 2) -> (n, D).
absl::StatusOr<Tensor> FourierEncode(const Tensor& p, const Tensor& fourier);

struct RenAttentionOutput {
  Tensor out;   // (n_p, D)
  Tensor maps;  // (H, n_p, N_k), rows sum to 1
};

// a = MHA(x, kv) of one layer (see header); project = false uses raw kv as
// values and skips w_o. x (n_p, D), kv (N_k, D). INVALID_ARGUMENT on shapes.
absl::StatusOr<RenAttentionOutput> RenAttention(const Tensor& x, const Tensor& kv,
                                                const RenLayerWeights& layer, int64_t heads,
                                                bool project);

// One cross-attention block: q (n_p, D) already has e added. Returns the new
// q and the attention maps. Errors as RenAttention.
absl::StatusOr<RenAttentionOutput> RenBlock(const Tensor& q, const Tensor& kv,
                                            const RenLayerWeights& layer, int64_t heads,
                                            bool last);

struct RenOutput {
  Tensor tokens;  // (n_p, D)
  Tensor maps;    // (H, n_p, Hp * Wp) of the last layer
};

// The full encoder. image_size is the pixel side of the (square) input image.
// INVALID_ARGUMENT on shape mismatch, bad weights, image_size <= 0 or
// non-finite points.
absl::StatusOr<RenOutput> RenForward(const Tensor& features, const Tensor& points,
                                     double image_size, const RenWeights& w);

// Greedy merge: in order, each unassigned token starts a group that takes
// every later unassigned token with cosine >= threshold; groups are averaged.
// tokens (n, D) -> (groups, D). INVALID_ARGUMENT on rank or threshold outside
// [-1, 1].
absl::StatusOr<Tensor> MergeRegionTokens(const Tensor& tokens, double threshold);

// FLOPs of one RenBlock: 4 n_p N_k D + 4 (n_p + N_k) D^2 + 8 n_p D^2.
double RenBlockFlops(int64_t n_p, int64_t n_k, int64_t d);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_REN_H_
