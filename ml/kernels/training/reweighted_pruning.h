// Pruning with gradient reweighting on outdated sub-models ("Computation and
// Memory-Efficient Model Compression with Gradient Reweighting", NeurIPS
// 2025; kernels_research.md section 11). No code is published; the abstract
// [F] says: the gradient of the *current* pruned network is estimated by
// reweighting gradients computed on an *outdated* sub-model instantiated
// earlier (fewer instantiations), and clipping plus a preconditioning matrix
// reduce the variance. The formulation below is the spec's reconstruction [I]
// in the probabilistic-mask (ProbMask / PGE) lineage:
//
//   m_i ~ Bernoulli(s_i), minimise J(s) = E_m L(w . m)  s.t. sum_i s_i <= k.
//   Sub-models m^(1..K) are drawn once from the scores s0 of that moment and
//   their losses L_k evaluated (forward passes only). At a later step with
//   scores s, each is reweighted by the likelihood ratio
//     rho_k = p(m^k | s) / p(m^k | s0),
//   clipped (truncation min(rho, c), Ionides 2008, or the PPO-style clamp to
//   [1 - eps, 1 + eps]), and
//     g = (1/K) sum_k rho_k (L_k - b_k) grad_s log p(m^k | s),
//     d/ds_i log p(m | s) = (m_i - s_i) / (s_i (1 - s_i)),
//   with b_k the leave-one-out mean of the other losses (K >= 2) or a
//   constant. Without clipping E[g] = grad J exactly (importance sampling;
//   the leave-one-out baseline is independent of sample k); truncation
//   trades that bias for a bounded weight.
//   Update: s <- Proj(s - lr * P g), P = diag(1 / (sqrt(v_hat) + eps)) with
//   v the bias-corrected EMA of g^2 (RMSprop, our choice of "preconditioning
//   matrix" [I]), optional global-norm clipping of g first, and Proj the
//   Euclidean projection onto {lo <= s_i <= 1 - lo, sum s_i <= k}.
//   Final mask: the top-k scores.
//
// Thread safety: the free functions are pure; ProbMaskPruner is
// thread-compatible (one thread at a time).
#ifndef TANDEM_ML_KERNELS_TRAINING_REWEIGHTED_PRUNING_H_
#define TANDEM_ML_KERNELS_TRAINING_REWEIGHTED_PRUNING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::training {

// Loss of the sub-model w . mask; mask has one 0/1 byte per parameter.
using MaskLossFn = std::function<absl::StatusOr<double>(absl::Span<const uint8_t> mask)>;

// Sub-models drawn from one set of scores (the "outdated" instantiation).
struct SubModelSamples {
  int64_t n = 0;                  // parameters
  std::vector<float> scores;      // s0 (n), the scores they were drawn from
  std::vector<uint8_t> masks;     // K x n, row-major, 0/1
  std::vector<double> losses;     // K
  int64_t count() const { return static_cast<int64_t>(losses.size()); }
};

// Draws K masks m ~ Bernoulli(scores) from `gen` and evaluates `loss` on
// each. INVALID_ARGUMENT unless K >= 1 and every score is in [0, 1]; a loss
// error is returned unchanged.
absl::StatusOr<SubModelSamples> DrawSubModels(absl::Span<const float> scores, int64_t k,
                                              std::mt19937_64& gen, const MaskLossFn& loss);

enum class WeightClip { kNone, kTruncate, kClamp };

struct ReweightOptions {
  WeightClip clip = WeightClip::kTruncate;
  double clip_value = 2.0;     // c (kTruncate, >= 1) or eps (kClamp, in (0, 1))
  bool leave_one_out = true;   // b_k = mean of the other losses (needs K >= 2)
  double baseline = 0.0;       // b when leave_one_out is off or K == 1
};

struct ReweightedGradient {
  std::vector<float> grad;      // (n) estimate of dJ/ds
  std::vector<double> weights;  // (K) the clipped rho_k
};

// log p(m | s) - log p(m | s0). INVALID_ARGUMENT on size mismatch or a
// score outside (0, 1).
absl::StatusOr<double> LogImportanceWeight(absl::Span<const uint8_t> mask,
                                           absl::Span<const float> scores,
                                           absl::Span<const float> old_scores);

// The estimator g above for the current scores. INVALID_ARGUMENT on size
// mismatch, scores outside (0, 1), no samples, or a bad clip_value.
absl::StatusOr<ReweightedGradient> ReweightedScoreGradient(const SubModelSamples& samples,
                                                           absl::Span<const float> scores,
                                                           const ReweightOptions& options);

// Euclidean projection of x onto {lo <= y_i <= hi, sum y_i <= budget}:
// y_i = clamp(x_i - tau, lo, hi) with the least tau >= 0 that meets the
// budget, found exactly from the sorted breakpoints (O(n log n)).
// INVALID_ARGUMENT unless lo <= hi, n lo <= budget and x is finite.
absl::StatusOr<std::vector<float>> ProjectScores(absl::Span<const float> x, double budget,
                                                 double lo, double hi);

// 0/1 mask keeping the k largest scores (ties: lower index first).
// INVALID_ARGUMENT unless 0 <= k <= n.
absl::StatusOr<std::vector<uint8_t>> TopKMask(absl::Span<const float> scores, int64_t k);

struct PrunerOptions {
  int64_t n = 0;                    // parameters
  int64_t keep = 0;                 // k, target count of kept weights, 1 <= k < n
  double learning_rate = 0.05;
  int64_t samples = 8;              // K sub-models per instantiation
  int64_t reinstantiate_every = 4;  // steps between instantiations (1 = every step)
  ReweightOptions reweight;
  double max_grad_norm = 0.0;       // 0 = no gradient clipping
  double rms_decay = 0.9;           // preconditioner EMA, [0, 1); 0 = sign-like steps
  double rms_epsilon = 1e-8;
  double min_score = 1e-3;          // lo; scores stay in [lo, 1 - lo]
  double initial_score = -1;        // < 0: k / n (feasible, uniform)
  uint64_t seed = 1;                // the mask draws
};

// Runs the optimisation above. Lifecycle: Create, then Step() repeatedly,
// then Mask(). Thread-compatible.
class ProbMaskPruner {
 public:
  // INVALID_ARGUMENT unless n >= 2, 1 <= keep < n, lr > 0, samples >= 1,
  // reinstantiate_every >= 1, max_grad_norm >= 0, rms_decay in [0, 1),
  // rms_epsilon > 0, min_score in (0, keep / n], initial_score < 1 and the
  // reweight options are valid.
  static absl::StatusOr<std::unique_ptr<ProbMaskPruner>> Create(const PrunerOptions& options);

  // One score update; draws fresh sub-models (K forward passes through
  // `loss`) when due, else reweights the outdated ones. Errors of `loss`
  // are returned unchanged and leave the scores as they were.
  absl::Status Step(const MaskLossFn& loss);

  const std::vector<float>& scores() const { return scores_; }
  int64_t steps() const { return steps_; }
  int64_t instantiations() const { return instantiations_; }
  int64_t forward_passes() const { return forward_passes_; }
  // Top-keep mask of the current scores.
  std::vector<uint8_t> Mask() const;

 private:
  explicit ProbMaskPruner(const PrunerOptions& options);
  PrunerOptions o_;
  std::mt19937_64 gen_;
  std::vector<float> scores_;
  std::vector<double> rms_;
  SubModelSamples samples_;
  int64_t steps_ = 0, instantiations_ = 0, forward_passes_ = 0;
};

// Layer-wise output reconstruction (the post-training pruning objective):
// L(m) = 1/(2N) || X W - X (W . m) ||_F^2, X (N, d_in) calibration inputs,
// W (d_in, d_out), mask over W row-major. Immutable, thread-safe.
class LayerReconstruction {
 public:
  // INVALID_ARGUMENT unless X, W are rank 2 with matching d_in.
  static absl::StatusOr<std::unique_ptr<LayerReconstruction>> Create(Tensor x, Tensor w);
  int64_t n() const { return w_.size(); }
  const Tensor& weights() const { return w_; }
  // INVALID_ARGUMENT unless mask.size() == n().
  absl::StatusOr<double> Loss(absl::Span<const uint8_t> mask) const;
  MaskLossFn AsLossFn() const;
  // FLOPs of one Loss: 2 N d_in d_out.
  double LossFlops() const;

 private:
  LayerReconstruction(Tensor x, Tensor w) : x_(std::move(x)), w_(std::move(w)) {}
  Tensor x_, w_;
};

}  // namespace tandem::ml::kernels::training

#endif  // TANDEM_ML_KERNELS_TRAINING_REWEIGHTED_PRUNING_H_
