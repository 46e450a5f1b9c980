#include "ml/kernels/search/frappe_sim.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::search {
namespace {

int64_t LeastPulled(const std::vector<int64_t>& n) {
  return std::min_element(n.begin(), n.end()) - n.begin();
}

}  // namespace

double GlrThreshold(int64_t t, double delta, int64_t objectives) {
  const double ll = 1.0 + std::log(static_cast<double>(std::max<int64_t>(t, 1)));
  return std::log(ll / delta) + static_cast<double>(objectives) * std::log(ll);
}

absl::StatusOr<BanditRun> RunPureExploration(absl::Span<const double> means, int64_t k,
                                             const PreferenceCone& cone, const BanditOptions& o) {
  if (!(o.delta > 0 && o.delta < 1) || !(o.sigma > 0) || o.max_samples < k ||
      o.max_samples > 1000000000 || o.fw_iterations < 1 || o.fw_iterations > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bandit options out of range: delta=", o.delta, " sigma=", o.sigma,
        " max_samples=", o.max_samples, " fw_iterations=", o.fw_iterations));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> truth, ParetoSet(means, k, cone));
  if (k < 2) return absl::InvalidArgumentError("pure exploration needs K >= 2 arms");
  const int64_t l = cone.dim();
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<double> noise(0.0, o.sigma);
  std::vector<double> sums(k * l, 0.0), est(k * l), tracked(k, 0.0), nd(k);
  BanditRun run;
  run.pulls.assign(k, 0);
  auto pull = [&](int64_t arm) {
    for (int64_t c = 0; c < l; ++c) sums[arm * l + c] += means[arm * l + c] + noise(gen);
    ++run.pulls[arm];
    ++run.samples;
  };
  for (int64_t arm = 0; arm < k; ++arm) pull(arm);
  while (true) {
    for (int64_t i = 0; i < k * l; ++i) est[i] = sums[i] / run.pulls[i / l];
    TANDEM_ASSIGN_OR_RETURN(FrappeObjective f, FrappeObjective::Create(est, k, cone, o.sigma));
    for (int64_t i = 0; i < k; ++i) nd[i] = static_cast<double>(run.pulls[i]);
    const double z = f.Value(nd);
    if (z >= GlrThreshold(run.samples, o.delta, l) || f.pieces().empty()) {
      run.stopped = true;
      run.recommended = f.pareto();
      break;
    }
    if (run.samples >= o.max_samples) {
      run.recommended = f.pareto();
      break;
    }
    if (o.sampler == Sampler::kUniform) {
      pull(LeastPulled(run.pulls));
      continue;
    }
    const int64_t least = LeastPulled(run.pulls);
    if (run.pulls[least] < std::sqrt(static_cast<double>(run.samples)) - 0.5 * k) {
      pull(least);
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(FrankWolfeResult fw, FrankWolfe(f, o.fw_iterations));
    int64_t best = 0;
    for (int64_t i = 0; i < k; ++i) {
      tracked[i] += fw.w[i];
      if (tracked[i] - run.pulls[i] > tracked[best] - run.pulls[best]) best = i;
    }
    pull(best);
  }
  run.correct = run.recommended == truth;
  return run;
}

absl::StatusOr<SamplerComparison> CompareSamplers(absl::Span<const double> means, int64_t k,
                                                  const PreferenceCone& cone,
                                                  const BanditOptions& o, int64_t runs) {
  if (runs < 1 || runs > 10000) {
    return absl::InvalidArgumentError(absl::StrCat("runs must be in [1, 10^4], got ", runs));
  }
  TANDEM_ASSIGN_OR_RETURN(FrappeObjective truth, FrappeObjective::Create(means, k, cone, o.sigma));
  TANDEM_ASSIGN_OR_RETURN(FrankWolfeResult star, FrankWolfe(truth, 20000));
  std::vector<absl::StatusOr<BanditRun>> results(2 * runs, absl::UnknownError("not run"));
  tbb::parallel_for(int64_t{0}, 2 * runs, [&](int64_t i) {
    BanditOptions oi = o;
    oi.seed = o.seed + static_cast<uint64_t>(i / 2);
    oi.sampler = i % 2 == 0 ? Sampler::kFrappe : Sampler::kUniform;
    results[i] = RunPureExploration(means, k, cone, oi);
  });
  SamplerComparison c;
  for (int64_t i = 0; i < 2 * runs; ++i) {
    TANDEM_RETURN_IF_ERROR(results[i].status());
    const BanditRun& r = *results[i];
    const double err = (r.stopped && r.correct) ? 0.0 : 1.0;
    if (i % 2 == 0) {
      c.frappe_mean_samples += static_cast<double>(r.samples) / runs;
      c.frappe_error_rate += err / runs;
    } else {
      c.uniform_mean_samples += static_cast<double>(r.samples) / runs;
      c.uniform_error_rate += err / runs;
    }
  }
  c.lower_bound = star.value > 0 ? std::log(1.0 / o.delta) / star.value : 0.0;
  return c;
}

}  // namespace tandem::ml::kernels::search
