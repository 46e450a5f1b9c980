// FraPPE's sampling and stopping rules and a Gaussian bandit simulator that
// measures sample complexity against a uniform-sampling baseline (arXiv
// 2508.16487, kernels_research.md section 6).
//
// Per round, with empirical means M^ and pull counts N (t = sum N):
//   stop  when the GLR statistic Z_t = f_{M^}(N) (the reduced inner minimum
//         of frappe.h at unnormalised weights N; f is 1-homogeneous) reaches
//         beta(t, delta) = log((1 + log t) / delta) + L log(1 + log t);
//         the spec's heuristic threshold [F: "~ log((1 + log t)/delta) +
//         L-dependent terms"]; the L term is our choice [I]. It is the usual
//         experimental threshold, not a proven delta-correct one.
//   pull  (FraPPE) forced exploration: the least pulled arm while
//         min_k N_k < sqrt(t) - K/2; otherwise C-tracking: w_t = Frank-Wolfe
//         (fw_iterations steps from uniform) on f_{M^}, S += w_t, pull
//         argmax_k S_k - N_k (Garivier & Kaufmann 2016 tracking) [I: FWS-style].
//         (uniform) round robin: the least pulled arm, lowest index first.
// Every arm is pulled once first. Recommendation: the Pareto set of M^.
//
// Thread safety: pure functions; each run owns its generator.
#ifndef TANDEM_ML_KERNELS_SEARCH_FRAPPE_SIM_H_
#define TANDEM_ML_KERNELS_SEARCH_FRAPPE_SIM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/search/frappe.h"

namespace tandem::ml::kernels::search {

enum class Sampler { kFrappe, kUniform };

struct BanditOptions {
  double delta = 0.05;           // confidence, in (0, 1)
  double sigma = 1.0;            // noise standard deviation, > 0
  int64_t max_samples = 1000000; // budget; a run that hits it reports stopped = false
  int64_t fw_iterations = 200;   // Frank-Wolfe steps per round
  Sampler sampler = Sampler::kFrappe;
  uint64_t seed = 1;
};

struct BanditRun {
  int64_t samples = 0;
  bool stopped = false;
  bool correct = false;              // recommended == true Pareto set
  std::vector<int64_t> recommended;  // sorted arm indices
  std::vector<int64_t> pulls;        // per arm
};

// GLR threshold beta(t, delta) of the header. REQUIRES: t >= 1.
double GlrThreshold(int64_t t, double delta, int64_t objectives);

// One pure-exploration run on the Gaussian bandit with mean matrix `means`
// (K x L). INVALID_ARGUMENT on sizes, K < 2, delta outside (0, 1),
// sigma <= 0, max_samples outside [K, 10^9] or fw_iterations outside
// [1, 10^6].
absl::StatusOr<BanditRun> RunPureExploration(absl::Span<const double> means, int64_t k,
                                             const PreferenceCone& cone, const BanditOptions& o);

struct SamplerComparison {
  double frappe_mean_samples = 0, uniform_mean_samples = 0;
  double frappe_error_rate = 0, uniform_error_rate = 0;  // wrong or not stopped
  double lower_bound = 0;  // T*(M) log(1/delta), with T* from Frank-Wolfe on M
};

// `runs` paired runs of both samplers, seeds o.seed + r (runs in [1, 10^4]).
// Errors as RunPureExploration.
absl::StatusOr<SamplerComparison> CompareSamplers(absl::Span<const double> means, int64_t k,
                                                  const PreferenceCone& cone,
                                                  const BanditOptions& o, int64_t runs);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_FRAPPE_SIM_H_
