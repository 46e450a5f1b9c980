#include "ml/kernels/distill/sled.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::distill {
namespace {

// |a|^beta and the gradient factor beta |a|^(beta - 2) (0 at a = 0).
struct PowNorm {
  double value, factor;
};

PowNorm Norm(const float* a, const float* b, int64_t d, double beta) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) {
    const double x = double{a[i]} - b[i];
    s += x * x;
  }
  if (s == 0) return {0.0, 0.0};
  const double n = std::sqrt(s);
  if (beta == 1.0) return {n, 1.0 / n};
  return {std::pow(n, beta), beta * std::pow(n, beta - 2.0)};
}

}  // namespace

absl::StatusOr<EnergyLossResult> EnergyDistanceLoss(const Tensor& samples, const Tensor& target,
                                                    const Tensor& mask,
                                                    const EnergyLossOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckRank(samples, 3, "SLED samples"));
  TANDEM_RETURN_IF_ERROR(CheckRank(target, 2, "SLED target"));
  TANDEM_RETURN_IF_ERROR(CheckRank(mask, 1, "SLED mask"));
  const int64_t t = samples.dim(0), m = samples.dim(1), d = samples.dim(2);
  if (target.dim(0) != t || target.dim(1) != d || mask.dim(0) != t || m < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLED needs samples (T, m >= 2, D), target (T, D) and mask (T); got ",
        samples.ShapeString(), ", ", target.ShapeString(), ", ", mask.ShapeString()));
  }
  if (!(options.beta > 0 && options.beta <= 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLED beta must be in (0, 2], got ", options.beta));
  }
  double total_w = 0;
  for (float w : mask.data()) {
    if (!(w >= 0) || !std::isfinite(w)) {
      return absl::InvalidArgumentError("SLED mask weights must be finite and >= 0");
    }
    total_w += w;
  }
  EnergyLossResult out;
  TANDEM_ASSIGN_OR_RETURN(out.grad_samples, Tensor::Zeros(samples.shape()));
  if (total_w == 0) return out;
  const double beta = options.beta, md = static_cast<double>(m);
  const double c_fit = 2.0 / md, c_rep = 1.0 / (md * (md - 1.0));
  std::vector<double> per_step(static_cast<size_t>(t), 0.0);
  tbb::parallel_for(int64_t{0}, t, [&](int64_t step) {
    const double w = mask.ptr()[step];
    if (w == 0) return;
    const float* s = samples.ptr() + step * m * d;
    const float* y = target.ptr() + step * d;
    float* g = out.grad_samples.mutable_ptr() + step * m * d;
    const double scale = w / total_w;
    std::vector<double> gs(static_cast<size_t>(m * d), 0.0);
    double l = 0;
    for (int64_t i = 0; i < m; ++i) {
      const PowNorm fit = Norm(s + i * d, y, d, beta);
      l += c_fit * fit.value;
      for (int64_t c = 0; c < d; ++c) gs[i * d + c] += c_fit * fit.factor * (double{s[i * d + c]} - y[c]);
      for (int64_t j = i + 1; j < m; ++j) {
        // Each unordered pair appears twice in the i != j sum.
        const PowNorm rep = Norm(s + i * d, s + j * d, d, beta);
        l -= 2.0 * c_rep * rep.value;
        for (int64_t c = 0; c < d; ++c) {
          const double diff = 2.0 * c_rep * rep.factor * (double{s[i * d + c]} - s[j * d + c]);
          gs[i * d + c] -= diff;
          gs[j * d + c] += diff;
        }
      }
    }
    per_step[step] = scale * l;
    for (int64_t i = 0; i < m * d; ++i) g[i] = static_cast<float>(scale * gs[i]);
  });
  for (double v : per_step) out.loss += v;
  return out;
}

}  // namespace tandem::ml::kernels::distill
