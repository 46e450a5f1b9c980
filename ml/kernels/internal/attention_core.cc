#include "ml/kernels/internal/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "Eigen/Core"
#include "ml/kernels/internal/few_rows.h"

namespace tandem::ml::kernels::internal {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstStrided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using Strided = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

}  // namespace

void SoftmaxInPlace(float* x, int64_t n) {
  // Eigen's vectorised exp (exp(-inf) = 0, as the masks need; a scalar
  // std::exp per score was a third of a compacted decode step), on aligned
  // chunks of 16 with a 16-lane sum: every element goes through the same
  // packet exp and the sum through the same order whatever x's address (a
  // Map would peel an unaligned head through scalar exp, and callers
  // compare outputs bit for bit across buffers).
  using Chunk = Eigen::Array<float, 16, 1>;
  const float m = Eigen::Map<const Eigen::ArrayXf>(x, n).maxCoeff();  // exact in any order
  Chunk sum = Chunk::Zero();
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t c = std::min<int64_t>(16, n - i);
    Chunk v = Chunk::Constant(-std::numeric_limits<float>::infinity());
    std::copy(x + i, x + i + c, v.data());
    v = (v - m).exp();
    sum += v;
    std::copy(v.data(), v.data() + c, x + i);
  }
  const float inv = 1.0f / sum.sum();
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void AttendRows(const float* q, int64_t q_stride, int64_t nq, const float* k, int64_t k_stride,
                const float* v, int64_t v_stride, int64_t nk, int64_t d, int64_t causal_offset,
                float scale, float* out, int64_t out_stride) {
  ConstStrided qm(q, nq, d, Eigen::OuterStride<>(q_stride));
  ConstStrided km(k, nk, d, Eigen::OuterStride<>(k_stride));
  ConstStrided vm(v, nk, d, Eigen::OuterStride<>(v_stride));
  Strided om(out, nq, d, Eigen::OuterStride<>(out_stride));
  RowMat s(nq, nk);
  // A decode step's few rows of contiguous q, k and v: each key and value
  // row read once for all rows, no packing (few_rows.h).
  const bool few = nq <= kFewRows && q_stride == d && k_stride == d && v_stride == d;
  if (few) {
    ScoreFewRows(q, nq, k, nk, d, scale, s.data(), nk);
  } else {
    s.noalias() = qm * km.transpose();
    s *= scale;
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < nq; ++i) {
    float* row = s.data() + i * nk;
    if (causal_offset >= 0) {
      for (int64_t j = std::max<int64_t>(0, i + causal_offset + 1); j < nk; ++j) row[j] = neg_inf;
    }
    SoftmaxInPlace(row, nk);
  }
  if (few && out_stride == d) {
    std::fill(out, out + nq * d, 0.0f);
    AccumulateFewRows(s.data(), nk, nq, v, nk, d, out);
  } else {
    om.noalias() = s * vm;
  }
}

}  // namespace tandem::ml::kernels::internal
