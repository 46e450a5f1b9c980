#include "server/core/coordinator_plan.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "ml/spec/model_from_spec.h"
#include "server/core/noise_calibration.h"
#include "server/core/task_targets.h"

namespace tandem::server {

absl::StatusOr<std::optional<std::string>> PlanPrivateRounds(bool opaque, CoordinatorStore& store,
                                                             CoordinatorOptions* o) {
  if (o->target_epsilon == 0 && o->max_upload_vs_dense == 0) return std::nullopt;
  const uint32_t every = o->evaluation.every;
  const TaskTargets targets{.max_upload_vs_dense = o->max_upload_vs_dense,
                            .target_epsilon = o->target_epsilon,
                            .rounds = o->rounds,
                            .evaluations = every > 0 ? o->rounds / every : 0,
                            .evaluation_noise_multiplier = o->evaluation.noise_multiplier};
  SecureSumConfig& sum = o->task.secure_sum;
  // The targets and the d and z given (what the plan starts from: a given d
  // is the one a target epsilon is calibrated for).
  const std::string key =
      absl::StrFormat("%a/%a/%d/%d/%a/%u/%a ", targets.max_upload_vs_dense, targets.target_epsilon,
                      targets.rounds, targets.evaluations, targets.evaluation_noise_multiplier,
                      sum.log_blocks_per_group, sum.noise_multiplier);
  TANDEM_ASSIGN_OR_RETURN(const std::optional<std::string> stored,
                          store.GetMeta(kPlannedRoundsMeta));
  if (stored.has_value() && absl::StartsWith(*stored, key)) {
    const std::vector<std::string> dz = absl::StrSplit(stored->substr(key.size()), ' ');
    uint32_t d = 0;
    char* end = nullptr;
    const double z = dz.size() == 2 ? std::strtod(dz[1].c_str(), &end) : 0;
    if (dz.size() != 2 || !absl::SimpleAtoi(dz[0], &d) || d > 24 || end == nullptr ||
        *end != '\0' || !(z > 0) || !std::isfinite(z)) {
      return absl::DataLossError(
          absl::StrCat("the stored plan of the private rounds is malformed: ", *stored));
    }
    if (o->target_epsilon != 0) {
      TANDEM_ASSIGN_OR_RETURN(o->task.epsilon_budget,
                              BudgetForTarget(o->task.epsilon_budget, o->target_epsilon));
    }
    sum.log_blocks_per_group = d;
    sum.noise_multiplier = z;
    return std::nullopt;
  }
  uint64_t dimension = o->initial_params.size();
  if (!opaque) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model, ml::ModelFromSpec(o->model));
    dimension = static_cast<uint64_t>(model->num_params());
  }
  TANDEM_RETURN_IF_ERROR(ApplyTaskTargets(targets, dimension, &o->task));
  TANDEM_LOG(INFO) << "task " << o->task_id << ": d = " << sum.log_blocks_per_group
                   << ", noise multiplier " << sum.noise_multiplier << " (upload cap "
                   << o->max_upload_vs_dense << " x dense, target epsilon " << o->target_epsilon
                   << " over " << o->rounds << " rounds and " << targets.evaluations
                   << " evaluations)";
  return absl::StrFormat("%s%u %a", key, sum.log_blocks_per_group, sum.noise_multiplier);
}

}  // namespace tandem::server
