// Spotlight hash training: the Bradley-Terry ranking loss of arXiv 2508.19740
// (kernels_research.md section 7) with analytic gradients and an AdamW step.
//
// Soft code c(x) = gamma h(x) / (1 + |gamma h(x)|) (elementwise), draft score
// draft_ij = <c(q_i), c(k_j)>, true score true_ij = <q_i, k_j>. For query i,
// the valid keys are j <= p_i (causal: query i sits at position
// Nk - Nq + i) or all keys; T_i = the ceil(top_fraction |valid|) best valid
// keys by true score (ties: lower position), O_i = the other valid keys.
//   loss = mean over all (i, t in T_i, o in O_i) of
//          softplus(-(beta (draft_it - draft_io) - margin))
// i.e. BCEWithLogits(beta Delta - margin, 1). We use every pair instead of
// the reference's random subsample (max 1024 each), so the loss is
// deterministic; queries with an empty O_i are skipped.
// Thread safety: SpotlightRankingLoss is pure; SpotlightTrainer is not
// thread-safe (one instance per training run).
#ifndef TANDEM_ML_KERNELS_SPOTLIGHT_TRAIN_H_
#define TANDEM_ML_KERNELS_SPOTLIGHT_TRAIN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

struct SpotlightLossOptions {
  float gamma = 64.0f;          // soft-sign sharpness
  float beta = 1.0f;            // logit scale of the score difference
  float margin = 0.0f;          // m
  float top_fraction = 0.02f;   // |T_i| / |valid_i|, in (0, 1)
  bool causal = true;           // restrict query i to keys j <= Nk - Nq + i
};

struct SpotlightLossResult {
  double loss = 0;
  int64_t pairs = 0;
  SpotlightHashWeights grads;  // dloss / d(w1, b1, w2, b2)
};

// q (Nq, d), k (Nk, d). INVALID_ARGUMENT on shape mismatch, bad weights,
// options out of range, causal with Nq > Nk, or when no query has a pair.
absl::StatusOr<SpotlightLossResult> SpotlightRankingLoss(const Tensor& q, const Tensor& k,
                                                         const SpotlightHashWeights& weights,
                                                         const SpotlightLossOptions& opt);

struct AdamWOptions {
  float lr = 1e-3f;            // learning rate
  float beta1 = 0.9f;
  float beta2 = 0.98f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;   // decoupled (Loshchilov & Hutter 2019)
  float clip_norm = 1.0f;      // global L2 gradient clip; 0 disables
};

// Owns the hash weights and the AdamW moments.
class SpotlightTrainer {
 public:
  // INVALID_ARGUMENT on bad weights or options.
  static absl::StatusOr<SpotlightTrainer> Create(SpotlightHashWeights weights,
                                                 SpotlightLossOptions loss, AdamWOptions adam);
  // One step on (q, k); returns the loss before the update. Errors as
  // SpotlightRankingLoss; the weights are unchanged on error.
  absl::StatusOr<double> Step(const Tensor& q, const Tensor& k);
  const SpotlightHashWeights& weights() const { return weights_; }
  int64_t steps() const { return steps_; }

 private:
  SpotlightTrainer(SpotlightHashWeights w, SpotlightHashWeights m, SpotlightHashWeights v,
                   SpotlightLossOptions loss, AdamWOptions adam);
  SpotlightHashWeights weights_, m_, v_;
  SpotlightLossOptions loss_;
  AdamWOptions adam_;
  int64_t steps_ = 0;
};

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_SPOTLIGHT_TRAIN_H_
