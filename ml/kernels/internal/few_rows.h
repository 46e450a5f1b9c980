// The two products of attention for a handful of query rows (a decode
// step: the G query heads of one KV head, one query each) against a block
// of keys and values stored row-major, as the KV cache holds them. A GEMM
// packs the key or value block before multiplying it (Eigen's gemm_pack_*
// were half of a decode step's time over a 512K-token cache) and a
// row-at-a-time matrix-vector product reads the block once per row; these
// read each key and value row once for all query rows, with no packing.
//
// Arithmetic: with d a multiple of 16 the dot products run 16 lanes wide
// (lane t % 16 of each row's partial sums, then a fixed reduction tree
// over the lanes); otherwise plainly. Either way the result depends on the
// shapes only, never on the machine's thread count or the keys' location,
// so callers that split keys into fixed blocks stay bit-exact across page
// layouts (ml/kernels/kv_runs.h). Internal to ml/kernels; pure functions,
// thread-safe for disjoint outputs.
#ifndef TANDEM_ML_KERNELS_INTERNAL_FEW_ROWS_H_
#define TANDEM_ML_KERNELS_INTERNAL_FEW_ROWS_H_

#include <cstdint>

namespace tandem::ml::kernels::internal {

// Row counts up to this take these kernels (callers decide).
inline constexpr int64_t kFewRows = 16;

// s[i * s_stride + j] = scale * <q_i, k_j> for i < rows, j < n, where q_i =
// q + i * d and k_j = k + j * d. REQUIRES: rows, n, d > 0; s_stride >= n.
void ScoreFewRows(const float* q, int64_t rows, const float* k, int64_t n, int64_t d, float scale,
                  float* s, int64_t s_stride);

// acc[i * d + t] += sum_j p[i * p_stride + j] * v[j * d + t] for i < rows,
// t < d, the sum over j < n taken in order of j. REQUIRES: rows, n, d > 0.
void AccumulateFewRows(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t n,
                       int64_t d, float* acc);

}  // namespace tandem::ml::kernels::internal

#endif  // TANDEM_ML_KERNELS_INTERNAL_FEW_ROWS_H_
