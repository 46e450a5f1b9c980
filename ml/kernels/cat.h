// CAT: Circular-convolutional Attention (Yamada, arXiv 2504.06704).
//
// Per head h, a logit vector z_h in R^N (z = X W_A) is softmaxed over the
// sequence axis, z* = softmax(z_h), and defines the circulant
//   R_ij = z*_{(j - i) mod N}          (convention chosen here, documented)
// so Y_h = R V_h, i.e. y_i = sum_j z*_{(j-i) mod N} v_j: a circular
// cross-correlation, computed in O(N log N) per channel as
//   Y_h = IFFT( conj(FFT(z*)) . FFT(V_h) )
// with exact length-N transforms (Bluestein for non powers of two, never
// zero padding, which would break circularity). Every row and column of R
// sums to 1. The gather form (explicit sum, O(N^2)) is the reference.
// Unlike one third-party implementation we do not divide R by N: that is not
// in the paper's formula.
//
// Shapes: z_logits (B, H, N); v (B, N, D) with D % H == 0, head h owning
// channels [h D/H, (h+1) D/H); output (B, N, D).
// Thread safety: pure functions over the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_CAT_H_
#define TANDEM_ML_KERNELS_CAT_H_

#include "absl/status/statusor.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

enum class CatMethod { kFft, kGather };

// Returns INVALID_ARGUMENT unless the shapes are as above.
absl::StatusOr<Tensor> CatMix(const Tensor& z_logits, const Tensor& v, CatMethod method);

// Full CAT layer: z = x W_A (B,N,H), V = x W_V, Y = CatMix(z, V) W_O.
// x (B, N, D), w_a (D, H), w_v (D, D), w_o (D, D). INVALID_ARGUMENT on shape
// mismatch or D % H != 0.
absl::StatusOr<Tensor> CatForward(const Tensor& x, const Tensor& w_a, const Tensor& w_v,
                                  const Tensor& w_o, CatMethod method);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_CAT_H_
