#include "ml/kernels/distill/sdpgo.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::distill {
namespace {

constexpr double kDistributionTolerance = 1e-3;

absl::Status NonNegative(double v, const char* what) {
  if (!std::isfinite(v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat("SDPGO ", what, " must be finite and >= 0, got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckDistributions(const Tensor& q, const char* what) {
  const int64_t c = q.dim(1);
  for (int64_t r = 0; r < q.dim(0); ++r) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j) {
      const float v = q.ptr()[r * c + j];
      if (v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, " row ", r, " has a negative entry"));
      }
      s += v;
    }
    if (std::fabs(s - 1.0) > kDistributionTolerance) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " row ", r, " sums to ", s, ", not 1 (a distribution is required)"));
    }
  }
  return absl::OkStatus();
}

// Softmax of row z / tau into out (float64).
void Softmax(const float* z, int64_t c, double tau, double* out) {
  double m = z[0];
  for (int64_t j = 1; j < c; ++j) m = std::max(m, double{z[j]});
  double s = 0;
  for (int64_t j = 0; j < c; ++j) s += out[j] = std::exp((z[j] - m) / tau);
  for (int64_t j = 0; j < c; ++j) out[j] /= s;
}

void RefineRow(const double* p, const float* q, int64_t c, double eta, float* out) {
  const double a = eta / (1.0 + eta), b = 1.0 / (1.0 + eta);
  // In log space so that tiny probabilities do not underflow; q = 0 stays 0.
  std::vector<double> lg(static_cast<size_t>(c));
  double m = -INFINITY;
  for (int64_t j = 0; j < c; ++j) {
    lg[j] = q[j] > 0 ? a * std::log(p[j]) + b * std::log(double{q[j]}) : -INFINITY;
    m = std::max(m, lg[j]);
  }
  double s = 0;
  for (int64_t j = 0; j < c; ++j) s += lg[j] = std::exp(lg[j] - m);
  for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(lg[j] / s);
}

}  // namespace

absl::StatusOr<Tensor> SoftThreshold(const Tensor& x, double lambda) {
  TANDEM_RETURN_IF_ERROR(NonNegative(lambda, "lambda"));
  Tensor out = x;
  for (float& v : out.mutable_data()) {
    const double a = std::max(std::fabs(double{v}) - lambda, 0.0);
    v = static_cast<float>(v < 0 ? -a : a);
  }
  return out;
}

absl::StatusOr<Tensor> GradientFeatureWeights(const Tensor& grad, double lambda) {
  TANDEM_RETURN_IF_ERROR(CheckRank(grad, 2, "SDPGO feature gradient"));
  TANDEM_RETURN_IF_ERROR(NonNegative(lambda, "lambda"));
  Tensor w = grad;
  const int64_t f = grad.dim(1);
  tbb::parallel_for(int64_t{0}, grad.dim(0), [&](int64_t r) {
    float* row = w.mutable_ptr() + r * f;
    double s = 0;
    for (int64_t j = 0; j < f; ++j) {
      const double a = std::max(std::fabs(double{row[j]}) - lambda, 0.0);
      row[j] = static_cast<float>(a);
      s += a;
    }
    if (s > 0) {
      for (int64_t j = 0; j < f; ++j) row[j] = static_cast<float>(row[j] / s);
    }
  });
  return w;
}

absl::StatusOr<Tensor> ProximalTargetRefinement(const Tensor& p, const Tensor& q, double eta) {
  TANDEM_RETURN_IF_ERROR(CheckRank(p, 2, "SDPGO current prediction"));
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "SDPGO historical prediction"));
  if (p.shape() != q.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("SDPGO predictions differ in shape: ",
                                                   p.ShapeString(), " vs ", q.ShapeString()));
  }
  TANDEM_RETURN_IF_ERROR(NonNegative(eta, "eta"));
  TANDEM_RETURN_IF_ERROR(CheckDistributions(p, "SDPGO current prediction"));
  TANDEM_RETURN_IF_ERROR(CheckDistributions(q, "SDPGO historical prediction"));
  Tensor out = q;
  const int64_t c = p.dim(1);
  tbb::parallel_for(int64_t{0}, p.dim(0), [&](int64_t r) {
    std::vector<double> pr(p.ptr() + r * c, p.ptr() + (r + 1) * c);
    RefineRow(pr.data(), q.ptr() + r * c, c, eta, out.mutable_ptr() + r * c);
  });
  return out;
}

absl::StatusOr<SdpgoResult> SdpgoLoss(const Tensor& logits, absl::Span<const int64_t> labels,
                                      const Tensor& features, const Tensor& feature_grad,
                                      const Tensor& prev_features, const Tensor& q_hist,
                                      const SdpgoOptions& o) {
  TANDEM_RETURN_IF_ERROR(CheckRank(logits, 2, "SDPGO logits"));
  TANDEM_RETURN_IF_ERROR(CheckRank(features, 2, "SDPGO features"));
  const int64_t b = logits.dim(0), c = logits.dim(1), f = features.dim(1);
  if (static_cast<int64_t>(labels.size()) != b || features.dim(0) != b ||
      feature_grad.shape() != features.shape() || prev_features.shape() != features.shape() ||
      q_hist.shape() != logits.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SDPGO needs logits and q_hist (B, C), B labels, features, feature_grad and "
        "prev_features (B, F); got logits ", logits.ShapeString(), ", ", labels.size(),
        " labels, features ", features.ShapeString(), ", feature_grad ",
        feature_grad.ShapeString(), ", prev_features ", prev_features.ShapeString(),
        ", q_hist ", q_hist.ShapeString()));
  }
  for (int64_t i = 0; i < b; ++i) {
    if (labels[i] < 0 || labels[i] >= c) {
      return absl::InvalidArgumentError(
          absl::StrCat("SDPGO label ", labels[i], " of sample ", i, " is outside [0, ", c, ")"));
    }
  }
  if (!(o.temperature >= 1e-2 && o.temperature <= 1e2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SDPGO temperature must be in [1e-2, 1e2], got ", o.temperature));
  }
  TANDEM_RETURN_IF_ERROR(NonNegative(o.alpha, "alpha"));
  TANDEM_RETURN_IF_ERROR(NonNegative(o.beta, "beta"));
  TANDEM_RETURN_IF_ERROR(NonNegative(o.eta, "eta"));
  TANDEM_RETURN_IF_ERROR(CheckDistributions(q_hist, "SDPGO historical prediction"));

  SdpgoResult out;
  TANDEM_ASSIGN_OR_RETURN(out.weights, GradientFeatureWeights(feature_grad, o.lambda));
  out.grad_logits = logits;
  out.grad_features = features;
  out.q_next = q_hist;
  std::vector<double> ce(static_cast<size_t>(b)), kl(ce.size()), feat(ce.size());
  const double tau = o.temperature, inv_b = 1.0 / static_cast<double>(b);
  tbb::parallel_for(int64_t{0}, b, [&](int64_t r) {
    const float* z = logits.ptr() + r * c;
    const float* q = q_hist.ptr() + r * c;
    std::vector<double> p1(static_cast<size_t>(c)), pt(p1.size());
    Softmax(z, c, 1.0, p1.data());
    Softmax(z, c, tau, pt.data());
    ce[r] = -std::log(std::max(p1[labels[r]], 1e-300));
    double k = 0;  // KL(q || pt), 0 log 0 = 0
    for (int64_t j = 0; j < c; ++j) {
      if (q[j] > 0) k += q[j] * (std::log(double{q[j]}) - std::log(std::max(pt[j], 1e-300)));
    }
    kl[r] = k;
    float* gz = out.grad_logits.mutable_ptr() + r * c;
    for (int64_t j = 0; j < c; ++j) {
      const double g = p1[j] - (j == labels[r] ? 1.0 : 0.0) + o.alpha * tau * (pt[j] - q[j]);
      gz[j] = static_cast<float>(g * inv_b);
    }
    const float* fr = features.ptr() + r * f;
    const float* fp = prev_features.ptr() + r * f;
    const float* w = out.weights.ptr() + r * f;
    float* gf = out.grad_features.mutable_ptr() + r * f;
    double s = 0;
    for (int64_t j = 0; j < f; ++j) {
      const double d = double{fr[j]} - fp[j];
      s += w[j] * d * d;
      gf[j] = static_cast<float>(2.0 * o.beta * w[j] * d * inv_b);
    }
    feat[r] = s;
    RefineRow(pt.data(), q, c, o.eta, out.q_next.mutable_ptr() + r * c);
  });
  for (int64_t r = 0; r < b; ++r) {
    out.ce += ce[r] * inv_b;
    out.kl += kl[r] * inv_b;
    out.feature += feat[r] * inv_b;
  }
  out.loss = out.ce + o.alpha * tau * tau * out.kl + o.beta * out.feature;
  return out;
}

}  // namespace tandem::ml::kernels::distill
