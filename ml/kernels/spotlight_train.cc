#include "ml/kernels/spotlight_train.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/spotlight_mlp.h"

namespace tandem::ml::kernels {
namespace {

using internal::RowMatF;

// log(1 + exp(x)) and its derivative sigmoid(x), stable for large |x|.
double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

absl::StatusOr<SpotlightHashWeights> ZerosLike(int64_t d) { return SpotlightHashWeights::Zeros(d); }

void CopyGrads(const internal::MlpGrads& g, SpotlightHashWeights* out) {
  std::copy_n(g.w1.data(), g.w1.size(), out->w1.mutable_ptr());
  std::copy_n(g.b1.data(), g.b1.size(), out->b1.mutable_ptr());
  std::copy_n(g.w2.data(), g.w2.size(), out->w2.mutable_ptr());
  std::copy_n(g.b2.data(), g.b2.size(), out->b2.mutable_ptr());
}

}  // namespace

absl::StatusOr<SpotlightLossResult> SpotlightRankingLoss(const Tensor& q, const Tensor& k,
                                                         const SpotlightHashWeights& weights,
                                                         const SpotlightLossOptions& opt) {
  TANDEM_RETURN_IF_ERROR(ValidateHashWeights(weights));
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "q"));
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 2, "k"));
  const int64_t d = weights.dim(), nq = q.dim(0), nk = k.dim(0);
  if (q.dim(1) != d || k.dim(1) != d) {
    return absl::InvalidArgumentError(absl::StrCat("q ", q.ShapeString(), " and k ",
                                                   k.ShapeString(), " must have dim ", d));
  }
  if (!(opt.top_fraction > 0.0f && opt.top_fraction < 1.0f) || !(opt.gamma > 0.0f) ||
      !std::isfinite(opt.beta) || !std::isfinite(opt.margin)) {
    return absl::InvalidArgumentError("need 0 < top_fraction < 1, gamma > 0, finite beta, margin");
  }
  if (opt.causal && nq > nk) return absl::InvalidArgumentError("causal loss needs Nq <= Nk");

  const internal::MlpActivations aq = internal::MlpForward(q, weights);
  const internal::MlpActivations ak = internal::MlpForward(k, weights);
  const float gamma = opt.gamma;
  auto soft = [gamma](float h) { return gamma * h / (1.0f + std::fabs(gamma * h)); };
  const RowMatF cq = aq.h.unaryExpr(soft), ck = ak.h.unaryExpr(soft);
  const RowMatF draft = cq * ck.transpose();
  Eigen::Map<const RowMatF> qm(q.ptr(), nq, d), km(k.ptr(), nk, d);
  const RowMatF truth = qm * km.transpose();

  // First pass: pair count; second: loss and dL/d draft.
  RowMatF g = RowMatF::Zero(nq, nk);
  double loss = 0;
  int64_t pairs = 0;
  std::vector<int64_t> order;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> tops;  // per query: top count, order
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t valid = opt.causal ? nk - nq + i + 1 : nk;
    const int64_t t = static_cast<int64_t>(std::ceil(opt.top_fraction * valid));
    if (valid - t < 1) {
      tops.push_back({0, {}});
      continue;
    }
    order.resize(valid);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return truth(i, a) > truth(i, b); });
    pairs += t * (valid - t);
    tops.push_back({t, order});
  }
  if (pairs == 0) return absl::InvalidArgumentError("no (top, other) pair to rank");
  const double inv_pairs = 1.0 / static_cast<double>(pairs);
  for (int64_t i = 0; i < nq; ++i) {
    const auto& [t, ord] = tops[i];
    for (int64_t a = 0; a < t; ++a) {
      const int64_t jt = ord[a];
      for (size_t b = t; b < ord.size(); ++b) {
        const int64_t jo = ord[b];
        const double x = opt.beta * (double{draft(i, jt)} - draft(i, jo)) - opt.margin;
        loss += Softplus(-x);
        const double dx = -Sigmoid(-x) * inv_pairs;  // d softplus(-x) / dx
        g(i, jt) += static_cast<float>(opt.beta * dx);
        g(i, jo) -= static_cast<float>(opt.beta * dx);
      }
    }
  }
  // Back through draft = cq ck^T, the soft sign and the MLP (shared weights).
  auto dsoft = [gamma](float gr, float h) {
    const float den = 1.0f + std::fabs(gamma * h);
    return gr * gamma / (den * den);
  };
  const RowMatF dhq = (g * ck).binaryExpr(aq.h, dsoft);
  const RowMatF dhk = (g.transpose() * cq).binaryExpr(ak.h, dsoft);
  internal::MlpGrads grads{RowMatF::Zero(d, d), RowMatF::Zero(d, d),
                           Eigen::RowVectorXf::Zero(d), Eigen::RowVectorXf::Zero(d)};
  internal::MlpBackward(q, weights, aq, dhq, &grads);
  internal::MlpBackward(k, weights, ak, dhk, &grads);
  SpotlightLossResult out;
  out.loss = loss * inv_pairs;
  out.pairs = pairs;
  TANDEM_ASSIGN_OR_RETURN(out.grads, ZerosLike(d));
  CopyGrads(grads, &out.grads);
  return out;
}

absl::StatusOr<SpotlightTrainer> SpotlightTrainer::Create(SpotlightHashWeights weights,
                                                          SpotlightLossOptions loss,
                                                          AdamWOptions adam) {
  TANDEM_RETURN_IF_ERROR(ValidateHashWeights(weights));
  if (!(adam.lr > 0) || !(adam.beta1 >= 0 && adam.beta1 < 1) ||
      !(adam.beta2 >= 0 && adam.beta2 < 1) || !(adam.eps > 0) || !(adam.weight_decay >= 0) ||
      !(adam.clip_norm >= 0)) {
    return absl::InvalidArgumentError("AdamW options out of range");
  }
  const int64_t d = weights.dim();
  TANDEM_ASSIGN_OR_RETURN(SpotlightHashWeights m, ZerosLike(d));
  TANDEM_ASSIGN_OR_RETURN(SpotlightHashWeights v, ZerosLike(d));
  return SpotlightTrainer(std::move(weights), std::move(m), std::move(v), loss, adam);
}

SpotlightTrainer::SpotlightTrainer(SpotlightHashWeights w, SpotlightHashWeights m,
                                   SpotlightHashWeights v, SpotlightLossOptions loss,
                                   AdamWOptions adam)
    : weights_(std::move(w)), m_(std::move(m)), v_(std::move(v)), loss_(loss), adam_(adam) {}

absl::StatusOr<double> SpotlightTrainer::Step(const Tensor& q, const Tensor& k) {
  TANDEM_ASSIGN_OR_RETURN(SpotlightLossResult r, SpotlightRankingLoss(q, k, weights_, loss_));
  Tensor* grads[] = {&r.grads.w1, &r.grads.b1, &r.grads.w2, &r.grads.b2};
  Tensor* params[] = {&weights_.w1, &weights_.b1, &weights_.w2, &weights_.b2};
  Tensor* ms[] = {&m_.w1, &m_.b1, &m_.w2, &m_.b2};
  Tensor* vs[] = {&v_.w1, &v_.b1, &v_.w2, &v_.b2};
  double norm2 = 0;
  for (Tensor* g : grads) {
    for (float x : g->data()) norm2 += double{x} * x;
  }
  const double norm = std::sqrt(norm2);
  const float clip =
      adam_.clip_norm > 0 && norm > adam_.clip_norm ? static_cast<float>(adam_.clip_norm / norm) : 1.0f;
  ++steps_;
  const float bc1 = 1.0f - std::pow(adam_.beta1, static_cast<float>(steps_));
  const float bc2 = 1.0f - std::pow(adam_.beta2, static_cast<float>(steps_));
  for (int t = 0; t < 4; ++t) {
    float* p = params[t]->mutable_ptr();
    float* m = ms[t]->mutable_ptr();
    float* v = vs[t]->mutable_ptr();
    const float* g = grads[t]->ptr();
    for (int64_t i = 0; i < params[t]->size(); ++i) {
      const float gi = g[i] * clip;
      m[i] = adam_.beta1 * m[i] + (1 - adam_.beta1) * gi;
      v[i] = adam_.beta2 * v[i] + (1 - adam_.beta2) * gi * gi;
      p[i] -= adam_.lr * (adam_.weight_decay * p[i] +
                          (m[i] / bc1) / (std::sqrt(v[i] / bc2) + adam_.eps));
    }
  }
  return r.loss;
}

}  // namespace tandem::ml::kernels
