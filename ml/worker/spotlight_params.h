// The Spotlight ranking loss's request parameters, shared by
// spotlight.ranking_loss (builtin_kernels.cc) and spotlight.train_step
// (model_kernels.cc): their specs, the work caps checked before the loss
// allocates its score matrix and ranking pairs, and the options read from a
// validated call. Header-only; thread-safe (pure functions).
#ifndef TANDEM_ML_WORKER_SPOTLIGHT_PARAMS_H_
#define TANDEM_ML_WORKER_SPOTLIGHT_PARAMS_H_

#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kernel_spec_helpers.h"

namespace tandem::ml::worker {

// gamma, beta, margin, top_fraction, causal.
inline std::vector<ParamSpec> SpotlightLossParams() {
  return {Real("gamma", 64, 1e-6, 1e6),
          Real("beta", 1, -1e6, 1e6),
          Real("margin", 0, -1e6, 1e6),
          Real("top_fraction", 0.02, 1e-6, 0.999),
          {"causal", 1, 0, 1, true}};
}

// INVALID_ARGUMENT "request too large" for the scores of q [nq, d] against
// k [nk, d] (inputs 0 and 1) or their ranking pairs.
inline absl::Status SpotlightLossBudget(const KernelCall& c) {
  const double nq = Dim(c.f32(0), 0), nk = Dim(c.f32(1), 0);
  TANDEM_RETURN_IF_ERROR(Budget(nq * nk, kMaxScratch / 8, "score matrix"));
  return Budget(nq * nk * nk * c.param("top_fraction"), 1e10, "ranking pairs");
}

inline kernels::SpotlightLossOptions SpotlightLossFrom(const KernelCall& c) {
  kernels::SpotlightLossOptions o;
  o.gamma = static_cast<float>(c.param("gamma"));
  o.beta = static_cast<float>(c.param("beta"));
  o.margin = static_cast<float>(c.param("margin"));
  o.top_fraction = static_cast<float>(c.param("top_fraction"));
  o.causal = c.int_param("causal") != 0;
  return o;
}

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_SPOTLIGHT_PARAMS_H_
