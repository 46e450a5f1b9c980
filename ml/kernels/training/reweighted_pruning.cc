#include "ml/kernels/training/reweighted_pruning.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels::training {
namespace {

absl::Status CheckOpenScores(absl::Span<const float> s, const char* what) {
  for (float x : s) {
    if (!(x > 0.0f && x < 1.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pruning: ", what, " must lie in (0, 1), got ", x));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReweight(const ReweightOptions& o) {
  if (o.clip == WeightClip::kTruncate && !(o.clip_value >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pruning: truncation needs clip_value >= 1, got ", o.clip_value));
  }
  if (o.clip == WeightClip::kClamp && !(o.clip_value > 0.0 && o.clip_value < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pruning: clamping needs clip_value in (0, 1), got ", o.clip_value));
  }
  if (!std::isfinite(o.baseline)) return absl::InvalidArgumentError("pruning: baseline not finite");
  return absl::OkStatus();
}

// S(tau) = sum_i clamp(x_i - tau, lo, hi).
double ClampedSum(absl::Span<const float> x, double tau, double lo, double hi) {
  double s = 0;
  for (float xi : x) s += std::clamp(static_cast<double>(xi) - tau, lo, hi);
  return s;
}

}  // namespace

absl::StatusOr<SubModelSamples> DrawSubModels(absl::Span<const float> scores, int64_t k,
                                              std::mt19937_64& gen, const MaskLossFn& loss) {
  if (k < 1) return absl::InvalidArgumentError("pruning: need at least one sub-model");
  for (float s : scores) {
    if (!(s >= 0.0f && s <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("pruning: score ", s, " outside [0, 1]"));
    }
  }
  SubModelSamples out;
  out.n = static_cast<int64_t>(scores.size());
  out.scores.assign(scores.begin(), scores.end());
  out.masks.resize(static_cast<size_t>(k * out.n));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int64_t j = 0; j < k; ++j) {
    uint8_t* m = out.masks.data() + j * out.n;
    for (int64_t i = 0; i < out.n; ++i) m[i] = u(gen) < scores[i] ? 1 : 0;
    TANDEM_ASSIGN_OR_RETURN(double l, loss(absl::MakeConstSpan(m, static_cast<size_t>(out.n))));
    out.losses.push_back(l);
  }
  return out;
}

absl::StatusOr<double> LogImportanceWeight(absl::Span<const uint8_t> mask,
                                           absl::Span<const float> scores,
                                           absl::Span<const float> old_scores) {
  if (mask.size() != scores.size() || old_scores.size() != scores.size()) {
    return absl::InvalidArgumentError(absl::StrCat("pruning: mask ", mask.size(), ", scores ",
                                                   scores.size(), ", old scores ",
                                                   old_scores.size(), " differ in size"));
  }
  TANDEM_RETURN_IF_ERROR(CheckOpenScores(scores, "scores"));
  TANDEM_RETURN_IF_ERROR(CheckOpenScores(old_scores, "old scores"));
  double lw = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    const double s = scores[i], s0 = old_scores[i];
    lw += mask[i] ? std::log(s / s0) : std::log1p(-s) - std::log1p(-s0);
  }
  return lw;
}

absl::StatusOr<ReweightedGradient> ReweightedScoreGradient(const SubModelSamples& samples,
                                                           absl::Span<const float> scores,
                                                           const ReweightOptions& o) {
  TANDEM_RETURN_IF_ERROR(CheckReweight(o));
  const int64_t n = samples.n, k = samples.count();
  if (k < 1 || static_cast<int64_t>(scores.size()) != n ||
      static_cast<int64_t>(samples.masks.size()) != k * n ||
      static_cast<int64_t>(samples.scores.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pruning: inconsistent samples (K=", k, ", n=", n, ", masks ", samples.masks.size(),
        ") for ", scores.size(), " scores"));
  }
  TANDEM_RETURN_IF_ERROR(CheckOpenScores(scores, "scores"));
  TANDEM_RETURN_IF_ERROR(CheckOpenScores(samples.scores, "old scores"));
  // Per-parameter terms once: log-ratio of keeping / dropping, and the
  // score-function factor 1 / (s (1 - s)). Then each sample costs n adds.
  std::vector<double> keep_lr(static_cast<size_t>(n)), drop_lr(keep_lr.size()), inv(keep_lr.size());
  for (int64_t i = 0; i < n; ++i) {
    const double si = scores[i], s0 = samples.scores[i];
    keep_lr[i] = std::log(si / s0);
    drop_lr[i] = std::log1p(-si) - std::log1p(-s0);
    inv[i] = 1.0 / (si * (1.0 - si));
  }
  ReweightedGradient out;
  const double loss_sum = std::accumulate(samples.losses.begin(), samples.losses.end(), 0.0);
  std::vector<double> g(static_cast<size_t>(n), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const uint8_t* m = samples.masks.data() + j * n;
    double lw = 0;
    for (int64_t i = 0; i < n; ++i) lw += m[i] ? keep_lr[i] : drop_lr[i];
    double rho = std::exp(lw);
    if (o.clip == WeightClip::kTruncate) rho = std::min(rho, o.clip_value);
    if (o.clip == WeightClip::kClamp) rho = std::clamp(rho, 1.0 - o.clip_value, 1.0 + o.clip_value);
    out.weights.push_back(rho);
    const double b = (o.leave_one_out && k >= 2)
                         ? (loss_sum - samples.losses[j]) / static_cast<double>(k - 1)
                         : o.baseline;
    const double coeff = rho * (samples.losses[j] - b) / static_cast<double>(k);
    if (coeff == 0.0) continue;
    for (int64_t i = 0; i < n; ++i) g[i] += coeff * (m[i] - scores[i]) * inv[i];
  }
  out.grad.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.grad[i] = static_cast<float>(g[i]);
  return out;
}

absl::StatusOr<std::vector<float>> ProjectScores(absl::Span<const float> x, double budget,
                                                 double lo, double hi) {
  const double n = static_cast<double>(x.size());
  if (!(lo <= hi) || !(n * lo <= budget) || !std::isfinite(budget)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pruning: projection needs lo <= hi and n lo <= budget; got lo=", lo, " hi=", hi,
        " n=", x.size(), " budget=", budget));
  }
  for (float xi : x) {
    if (!std::isfinite(xi)) return absl::InvalidArgumentError("pruning: non-finite score");
  }
  double tau = 0;
  double sum = ClampedSum(x, 0.0, lo, hi);
  if (sum > budget) {
    // S(tau) is piecewise linear and non-increasing with slope -(number of
    // coordinates strictly inside (lo, hi)). Sweep the sorted kinks
    // (x_i - hi: enters, x_i - lo: leaves) from tau = 0 until S reaches the
    // budget, then solve the linear piece.
    std::vector<std::pair<double, int>> kinks;
    kinks.reserve(2 * x.size());
    int64_t active = 0;
    for (float xi : x) {
      const double enter = static_cast<double>(xi) - hi, leave = static_cast<double>(xi) - lo;
      if (enter > 0) kinks.emplace_back(enter, +1);
      if (leave > 0) kinks.emplace_back(leave, -1);
      if (enter <= 0 && leave > 0) ++active;
    }
    std::sort(kinks.begin(), kinks.end());
    double at = 0;
    size_t e = 0;
    while (true) {
      const double next = e < kinks.size() ? kinks[e].first : INFINITY;
      const double reach = active > 0 ? at + (sum - budget) / static_cast<double>(active) : INFINITY;
      if (reach <= next) {
        tau = reach;
        break;
      }
      sum -= static_cast<double>(active) * (next - at);
      at = next;
      for (; e < kinks.size() && kinks[e].first == at; ++e) active += kinks[e].second;
    }
  }
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = static_cast<float>(std::clamp(static_cast<double>(x[i]) - tau, lo, hi));
  }
  return y;
}

absl::StatusOr<std::vector<uint8_t>> TopKMask(absl::Span<const float> scores, int64_t k) {
  if (k < 0 || k > static_cast<int64_t>(scores.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("pruning: keep ", k, " of ", scores.size(), " scores"));
  }
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<uint8_t> mask(scores.size(), 0);
  for (int64_t i = 0; i < k; ++i) mask[idx[i]] = 1;
  return mask;
}

ProbMaskPruner::ProbMaskPruner(const PrunerOptions& o) : o_(o), gen_(o.seed) {
  const double init = o.initial_score >= 0 ? o.initial_score
                                           : static_cast<double>(o.keep) / o.n;
  scores_.assign(static_cast<size_t>(o.n), static_cast<float>(init));
  // Start feasible: clamp into the box and under the budget.
  scores_ = *ProjectScores(scores_, static_cast<double>(o.keep), o.min_score, 1.0 - o.min_score);
  rms_.assign(static_cast<size_t>(o.n), 0.0);
}

absl::StatusOr<std::unique_ptr<ProbMaskPruner>> ProbMaskPruner::Create(const PrunerOptions& o) {
  if (o.n < 2 || o.keep < 1 || o.keep >= o.n || !(o.learning_rate > 0) || o.samples < 1 ||
      o.reinstantiate_every < 1 || !(o.max_grad_norm >= 0) ||
      !(o.rms_decay >= 0 && o.rms_decay < 1) || !(o.rms_epsilon > 0) || !(o.min_score > 0) ||
      !(o.min_score * o.n <= o.keep) || !(o.initial_score < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pruner: need n >= 2, 1 <= keep < n, lr > 0, samples >= 1, reinstantiate_every >= 1, "
        "max_grad_norm >= 0, rms_decay in [0, 1), rms_epsilon > 0, 0 < min_score <= keep/n, "
        "initial_score < 1; got n=", o.n, " keep=", o.keep, " lr=", o.learning_rate,
        " samples=", o.samples, " min_score=", o.min_score));
  }
  TANDEM_RETURN_IF_ERROR(CheckReweight(o.reweight));
  return std::unique_ptr<ProbMaskPruner>(new ProbMaskPruner(o));
}

absl::Status ProbMaskPruner::Step(const MaskLossFn& loss) {
  if (steps_ % o_.reinstantiate_every == 0) {
    TANDEM_ASSIGN_OR_RETURN(SubModelSamples fresh, DrawSubModels(scores_, o_.samples, gen_, loss));
    samples_ = std::move(fresh);
    ++instantiations_;
    forward_passes_ += o_.samples;
  }
  TANDEM_ASSIGN_OR_RETURN(ReweightedGradient rg,
                          ReweightedScoreGradient(samples_, scores_, o_.reweight));
  double norm = 0;
  for (float gi : rg.grad) norm += static_cast<double>(gi) * gi;
  norm = std::sqrt(norm);
  const double shrink =
      (o_.max_grad_norm > 0 && norm > o_.max_grad_norm) ? o_.max_grad_norm / norm : 1.0;
  const double correction = 1.0 - std::pow(o_.rms_decay, static_cast<double>(steps_ + 1));
  std::vector<float> x(scores_.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double gi = shrink * rg.grad[i];
    rms_[i] = o_.rms_decay * rms_[i] + (1.0 - o_.rms_decay) * gi * gi;
    const double precond = 1.0 / (std::sqrt(rms_[i] / correction) + o_.rms_epsilon);
    x[i] = static_cast<float>(scores_[i] - o_.learning_rate * precond * gi);
  }
  TANDEM_ASSIGN_OR_RETURN(scores_, ProjectScores(x, static_cast<double>(o_.keep), o_.min_score,
                                                 1.0 - o_.min_score));
  ++steps_;
  return absl::OkStatus();
}

std::vector<uint8_t> ProbMaskPruner::Mask() const { return *TopKMask(scores_, o_.keep); }

absl::StatusOr<std::unique_ptr<LayerReconstruction>> LayerReconstruction::Create(Tensor x,
                                                                                 Tensor w) {
  TANDEM_RETURN_IF_ERROR(CheckRank(x, 2, "calibration inputs X"));
  TANDEM_RETURN_IF_ERROR(CheckRank(w, 2, "weights W"));
  if (x.dim(1) != w.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("pruning: X ", x.ShapeString(), " and W ",
                                                   w.ShapeString(), " differ in d_in"));
  }
  return std::unique_ptr<LayerReconstruction>(new LayerReconstruction(std::move(x), std::move(w)));
}

absl::StatusOr<double> LayerReconstruction::Loss(absl::Span<const uint8_t> mask) const {
  if (static_cast<int64_t>(mask.size()) != n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pruning: mask has ", mask.size(), " entries, W has ", n()));
  }
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t din = w_.dim(0), dout = w_.dim(1);
  // X W - X (W . m) = X (W . (1 - m)): only the pruned weights matter.
  Mat pruned(din, dout);
  for (int64_t i = 0; i < din * dout; ++i) pruned.data()[i] = mask[i] ? 0.0f : w_.data()[i];
  const Mat r = Eigen::Map<const Mat>(x_.ptr(), x_.dim(0), din) * pruned;
  return 0.5 * r.cast<double>().squaredNorm() / static_cast<double>(x_.dim(0));
}

MaskLossFn LayerReconstruction::AsLossFn() const {
  return [this](absl::Span<const uint8_t> m) { return Loss(m); };
}

double LayerReconstruction::LossFlops() const {
  return 2.0 * static_cast<double>(x_.dim(0)) * w_.dim(0) * w_.dim(1);
}

}  // namespace tandem::ml::kernels::training
