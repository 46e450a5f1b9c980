#include "server/core/noise_calibration.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dp/calibration.h"

namespace tandem::server {
namespace {

// Blocks per group among which each client of a round at noise z picks one
// at random (1: no block sampling).
absl::StatusOr<int64_t> SampledBlocks(const FederatedTaskOptions& task, uint64_t dimension,
                                      double z) {
  if (task.num_recycled > 0 && task.secure_sum.encoding == EncodingChoice::kAuto) return 1;
  SecureSumConfig cfg = task.secure_sum;
  cfg.model_dimension = dimension;
  cfg.noise_multiplier = z;
  TANDEM_ASSIGN_OR_RETURN(const SecureSum sum, SecureSum::Create(cfg));
  return sum.sampled_blocks_per_group();
}

}  // namespace

absl::StatusOr<double> BudgetForTarget(double budget, double target_epsilon) {
  if (budget > target_epsilon) {
    return absl::InvalidArgumentError(absl::StrCat("the epsilon budget ", budget,
                                                   " exceeds the target epsilon ", target_epsilon));
  }
  return budget == 0 ? target_epsilon : budget;
}

absl::Status ApplyNoiseTarget(const NoiseTarget& target, uint64_t model_dimension,
                              FederatedTaskOptions* task) {
  if (!(target.target_epsilon > 0) || !std::isfinite(target.target_epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target epsilon must be finite and > 0, got ", target.target_epsilon));
  }
  if (target.rounds < 1) return absl::InvalidArgumentError("a target epsilon needs rounds >= 1");
  if (target.evaluations > 0 && target.evaluation_noise_multiplier == 0) {
    return absl::InvalidArgumentError(
        "evaluation rounds need noise when the training rounds have it (their metrics are a "
        "release too)");
  }
  TANDEM_ASSIGN_OR_RETURN(const double budget,
                          BudgetForTarget(task->epsilon_budget, target.target_epsilon));
  const dp::AccountantOptions ledger;  // the orders and conversion the ledger charges with
  auto calibrate = [&](int64_t blocks) -> absl::StatusOr<double> {
    std::vector<dp::PlannedReleases> plan = {{.q = task->sample_rate,
                                              .steps = static_cast<int64_t>(target.rounds),
                                              .blocks_per_group = blocks}};
    if (target.evaluations > 0) {
      plan.push_back({.q = task->sample_rate,
                      .steps = static_cast<int64_t>(target.evaluations),
                      .sigma = std::max(0.0, target.evaluation_noise_multiplier)});
    }
    return dp::MinNoiseMultiplier(plan, target.target_epsilon, task->delta, ledger.orders,
                                  ledger.conversion);
  };
  // Fixed point (header): the credited blocks only ever decrease, so this
  // ends within log2 of the first count + 1 steps.
  const double start =
      task->secure_sum.noise_multiplier > 0 ? task->secure_sum.noise_multiplier : 1.0;
  TANDEM_ASSIGN_OR_RETURN(int64_t credited, SampledBlocks(*task, model_dimension, start));
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const double z, calibrate(credited));
    TANDEM_ASSIGN_OR_RETURN(const int64_t sampled, SampledBlocks(*task, model_dimension, z));
    if (sampled >= credited) {
      task->secure_sum.noise_multiplier = z;
      task->epsilon_budget = budget;
      return absl::OkStatus();
    }
    credited = sampled;
  }
}

}  // namespace tandem::server
