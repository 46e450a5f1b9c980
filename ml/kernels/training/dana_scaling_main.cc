// tandem-dana-scaling: the DANA scaling experiment on power-law random
// features (arXiv 2505.16098; kernels_research.md section 5). Prints CSV of
// the closed-form risk at ~log-spaced steps for DANA-decaying, DANA-constant
// and SGD with momentum, all from theta = 0 on the same seeded instance and
// the same sample stream:
//   tandem-dana-scaling --alpha=1 --beta=0.3 --v=2000 --d=500 --steps=10000
// Columns: step,dana_decaying,dana_constant,sgd_momentum. A trailing comment
// line gives P(0) and the minimum risk (weighted least squares) when d is
// small enough to solve (d <= 2000).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ml/kernels/training/plrf.h"

ABSL_FLAG(double, alpha, 1.0, "data power law alpha (> 0)");
ABSL_FLAG(double, beta, 0.3, "target power law beta");
ABSL_FLAG(int64_t, v, 2000, "hidden dimension v");
ABSL_FLAG(int64_t, d, 500, "parameter dimension d");
ABSL_FLAG(int64_t, batch, 1, "minibatch size B");
ABSL_FLAG(int64_t, steps, 10000, "optimizer steps");
ABSL_FLAG(double, momentum, 0.9, "SGD-momentum coefficient (lr = gamma2 (1 - momentum))");
ABSL_FLAG(int64_t, log_points, 40, "number of log-spaced evaluation points");
ABSL_FLAG(uint64_t, seed, 1, "seed of W");
ABSL_FLAG(uint64_t, sample_seed, 2, "seed of the sample stream (shared by all optimizers)");

namespace tandem::ml::kernels::training {
namespace {

int Run() {
  auto problem = PlrfProblem::Create({.alpha = absl::GetFlag(FLAGS_alpha),
                                      .beta = absl::GetFlag(FLAGS_beta),
                                      .v = absl::GetFlag(FLAGS_v),
                                      .d = absl::GetFlag(FLAGS_d),
                                      .seed = absl::GetFlag(FLAGS_seed)});
  if (!problem.ok()) {
    std::fprintf(stderr, "%s\n", problem.status().ToString().c_str());
    return 2;
  }
  const PlrfRunOptions run{.steps = absl::GetFlag(FLAGS_steps),
                           .batch = absl::GetFlag(FLAGS_batch),
                           .momentum = absl::GetFlag(FLAGS_momentum),
                           .sample_seed = absl::GetFlag(FLAGS_sample_seed),
                           .log_points = absl::GetFlag(FLAGS_log_points)};
  const std::vector<PlrfOptimizer> kinds = {PlrfOptimizer::kDanaDecaying,
                                            PlrfOptimizer::kDanaConstant,
                                            PlrfOptimizer::kSgdMomentum};
  std::vector<PlrfCurve> curves;
  for (PlrfOptimizer k : kinds) {
    auto c = RunPlrf(**problem, k, run);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 2;
    }
    curves.push_back(*std::move(c));
  }
  std::printf("step");
  for (PlrfOptimizer k : kinds) std::printf(",%s", std::string(PlrfOptimizerName(k)).c_str());
  std::printf("\n");
  for (size_t i = 0; i < curves[0].steps.size(); ++i) {
    std::printf("%lld", static_cast<long long>(curves[0].steps[i]));
    for (const PlrfCurve& c : curves) std::printf(",%.6e", c.risk[i]);
    std::printf("\n");
  }
  std::printf("# P(0)=%.6e", (*problem)->InitialRisk());
  if ((*problem)->d() <= 2000) {
    double min_risk = 0;
    if ((*problem)->Optimum(&min_risk).ok()) std::printf(" min_risk=%.6e", min_risk);
  }
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace tandem::ml::kernels::training

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::ml::kernels::training::Run();
}
