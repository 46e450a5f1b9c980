// Shared CPU attention core (Eigen). Internal to ml/kernels.
#ifndef TANDEM_ML_KERNELS_INTERNAL_ATTENTION_CORE_H_
#define TANDEM_ML_KERNELS_INTERNAL_ATTENTION_CORE_H_

#include <cstdint>

namespace tandem::ml::kernels::internal {

// No causal mask.
inline constexpr int64_t kNoCausalMask = -1;

// out[i] = sum_j softmax_j(scale * <q_i, k_j>) v_j for i < nq, j < nk, where
// row r of a matrix X lives at x + r * x_stride (floats) and has d entries.
// With causal_offset >= 0, query i only sees keys j <= i + causal_offset.
// REQUIRES: nq, nk, d > 0; every query sees at least one key; pointers valid
// for the strided extents. Thread-safe for disjoint outputs.
void AttendRows(const float* q, int64_t q_stride, int64_t nq, const float* k, int64_t k_stride,
                const float* v, int64_t v_stride, int64_t nk, int64_t d, int64_t causal_offset,
                float scale, float* out, int64_t out_stride);

// In place numerically stable softmax of n floats (max subtracted first).
// Entries equal to -inf get weight 0. REQUIRES: at least one finite entry.
void SoftmaxInPlace(float* x, int64_t n);

}  // namespace tandem::ml::kernels::internal

#endif  // TANDEM_ML_KERNELS_INTERNAL_ATTENTION_CORE_H_
