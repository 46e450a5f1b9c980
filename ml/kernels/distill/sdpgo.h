// SDPGO: self-distillation via proximal gradient optimisation
// (OpenReview pbokMgz8e1; kernels_research.md section 14). No teacher: the
// student distils from its own historical predictions, with per-feature
// weights derived from real-time gradients [F]. The exact formulas are not
// public (the code repository is not in store), so these are the spec's
// reconstruction [I]:
//
//   weights   w = prox_{lambda |.|_1}(|G|) = max(|G| - lambda, 0), normalised
//               per sample to sum 1 (all-zero rows stay zero: every
//               feature's gradient was below the threshold). G = dL_CE/df.
//   loss      L = (1/B) sum_b [ CE(z_b, y_b)
//                   + alpha tau^2 KL(q_b || softmax(z_b / tau))
//                   + beta sum_f w_bf (f_bf - f'_bf)^2 ]
//               q = stored historical prediction of the same samples
//               (DLB-style, from the previous iteration), f' the stored
//               features; w and q are constants (no gradient flows into
//               them).
//   gradients dL/dz_b = (1/B) [softmax(z_b) - e_{y_b}
//                              + alpha tau (softmax(z_b/tau) - q_b)]
//             dL/df   = (2 beta / B) w (f - f')
//   refinement (the proximal step on the history, our design [I]):
//               q_next = argmin_{q in simplex} KL(q || p) + (1/eta) KL(q || q)
//                      = normalise(p^{eta/(1+eta)} q^{1/(1+eta)}),
//               p = softmax(z / tau): a KL-proximal point between the stored
//               and the current prediction; eta = 0 keeps the history,
//               eta -> infinity replaces it. The caller stores q_next (and f)
//               for the next visit of these samples.
//
// Thread safety: pure functions; rows run on the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_DISTILL_SDPGO_H_
#define TANDEM_ML_KERNELS_DISTILL_SDPGO_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::distill {

// sign(x) max(|x| - lambda, 0) elementwise: the proximal operator of
// lambda |.|_1. INVALID_ARGUMENT when lambda is negative or not finite.
absl::StatusOr<Tensor> SoftThreshold(const Tensor& x, double lambda);

// Per-sample normalised prox weights of |grad| (B, F), see header.
// INVALID_ARGUMENT unless rank 2 and lambda >= 0 finite.
absl::StatusOr<Tensor> GradientFeatureWeights(const Tensor& grad, double lambda);

// Row-wise q_next = normalise(p^{eta/(1+eta)} q^{1/(1+eta)}). p and q are
// (B, C) rows of probabilities. INVALID_ARGUMENT on shape mismatch, eta < 0
// or not finite, or a row that is not a distribution (negative entry or sum
// off 1 by more than 1e-3).
absl::StatusOr<Tensor> ProximalTargetRefinement(const Tensor& p, const Tensor& q, double eta);

struct SdpgoOptions {
  double temperature = 3.0;  // tau (not recovered [I]; a common KD value)
  double alpha = 1.0;        // weight of the KL term
  double beta = 1.0;         // weight of the gradient-weighted feature term
  double lambda = 0.0;       // soft threshold of the feature weights
  double eta = 1.0;          // proximal step of the history refinement
};

struct SdpgoResult {
  double loss = 0, ce = 0, kl = 0, feature = 0;  // batch means; loss = ce + alpha tau^2 kl + beta feature
  Tensor grad_logits;    // (B, C)
  Tensor grad_features;  // (B, F)
  Tensor weights;        // (B, F)
  Tensor q_next;         // (B, C)
};

// The whole step (header comment). logits (B, C), labels B ids in [0, C),
// features, feature_grad and prev_features (B, F), q_hist (B, C)
// distributions. INVALID_ARGUMENT on shape mismatch, a label out of range,
// q_hist rows that are not distributions, temperature outside [1e-2, 1e2],
// or alpha, beta, lambda, eta negative or not finite.
absl::StatusOr<SdpgoResult> SdpgoLoss(const Tensor& logits, absl::Span<const int64_t> labels,
                                      const Tensor& features, const Tensor& feature_grad,
                                      const Tensor& prev_features, const Tensor& q_hist,
                                      const SdpgoOptions& options);

}  // namespace tandem::ml::kernels::distill

#endif  // TANDEM_ML_KERNELS_DISTILL_SDPGO_H_
