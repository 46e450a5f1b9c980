#include "ml/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/attention_core.h"
#include "tbb/blocked_range2d.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels {
namespace {
constexpr int64_t kQueryTile = 128;
}  // namespace

absl::Status ValidateAttentionShapes(const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool causal) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 3, "q"));
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 3, "k"));
  TANDEM_RETURN_IF_ERROR(CheckRank(v, 3, "v"));
  if (k.shape() != v.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("k ", k.ShapeString(), " and v ", v.ShapeString(), " must match"));
  }
  if (q.dim(2) != k.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("head dim of q (", q.dim(2),
                                                   ") differs from k (", k.dim(2), ")"));
  }
  if (q.dim(0) % k.dim(0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query heads (", q.dim(0), ") must be a multiple of KV heads (", k.dim(0), ")"));
  }
  if (causal && q.dim(1) > k.dim(1)) {
    return absl::InvalidArgumentError("causal attention needs Nq <= Nk");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DenseAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                      bool causal) {
  TANDEM_RETURN_IF_ERROR(ValidateAttentionShapes(q, k, v, causal));
  const int64_t h = q.dim(0), nq = q.dim(1), d = q.dim(2), hkv = k.dim(0), nk = k.dim(1);
  const int64_t group = h / hkv;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, nq, d}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t tiles = (nq + kQueryTile - 1) / kQueryTile;
  float* o = out.mutable_ptr();
  tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, h, 0, tiles), [&](const auto& r) {
    for (int64_t hh = r.rows().begin(); hh < r.rows().end(); ++hh) {
      const float* kh = k.ptr() + (hh / group) * nk * d;
      const float* vh = v.ptr() + (hh / group) * nk * d;
      for (int64_t t = r.cols().begin(); t < r.cols().end(); ++t) {
        const int64_t i0 = t * kQueryTile;
        const int64_t rows = std::min(kQueryTile, nq - i0);
        // Query i0 + i is at position nk - nq + i0 + i; it sees keys <= that.
        const int64_t offset = causal ? nk - nq + i0 : internal::kNoCausalMask;
        const int64_t keys = causal ? std::min(nk, nk - nq + i0 + rows) : nk;
        internal::AttendRows(q.ptr() + (hh * nq + i0) * d, d, rows, kh, d, vh, d, keys, d, offset,
                             scale, o + (hh * nq + i0) * d, d);
      }
    }
  });
  return out;
}

absl::StatusOr<Tensor> MaskedAttentionNaive(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const std::function<bool(int64_t, int64_t)>& allowed) {
  TANDEM_RETURN_IF_ERROR(ValidateAttentionShapes(q, k, v, /*causal=*/false));
  const int64_t h = q.dim(0), nq = q.dim(1), d = q.dim(2), hkv = k.dim(0), nk = k.dim(1);
  const int64_t group = h / hkv;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, nq, d}));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(nk);
  for (int64_t hh = 0; hh < h; ++hh) {
    const float* qh = q.ptr() + hh * nq * d;
    const float* kh = k.ptr() + (hh / group) * nk * d;
    const float* vh = v.ptr() + (hh / group) * nk * d;
    for (int64_t i = 0; i < nq; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < nk; ++j) {
        if (!allowed(i, j)) {
          s[j] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double{qh[i * d + c]} * kh[j * d + c];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      if (m == -std::numeric_limits<double>::infinity()) {
        return absl::InvalidArgumentError(absl::StrCat("query ", i, " has no allowed key"));
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) sum += (s[j] = std::exp(s[j] - m));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < nk; ++j) acc += s[j] * vh[j * d + c];
        out.mutable_ptr()[(hh * nq + i) * d + c] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace tandem::ml::kernels
