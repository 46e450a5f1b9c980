#include "server/core/task_targets.h"

#include <utility>

#include "base/status_macros.h"
#include "server/core/noise_calibration.h"
#include "server/core/upload_cap.h"

namespace tandem::server {
namespace {

// ApplyTaskTargets on `task`, which it may leave half planned on error.
absl::Status Plan(const TaskTargets& targets, uint64_t model_dimension,
                  FederatedTaskOptions* task) {
  SecureSumConfig& sum = task->secure_sum;
  auto at_dimension = [&] {
    SecureSumConfig c = sum;
    c.model_dimension = model_dimension;
    return c;
  };
  const bool cap = targets.max_upload_vs_dense != 0;
  if (cap) {
    TANDEM_ASSIGN_OR_RETURN(sum.log_blocks_per_group,
                            LogBlocksForUploadCap(at_dimension(), targets.max_upload_vs_dense));
  }
  if (targets.target_epsilon == 0) return absl::OkStatus();
  const NoiseTarget noise{.target_epsilon = targets.target_epsilon,
                          .rounds = targets.rounds,
                          .evaluations = targets.evaluations,
                          .evaluation_noise_multiplier = targets.evaluation_noise_multiplier};
  const FederatedTaskOptions given = *task;
  // The calibrated noise can narrow the values (64 -> 32 bits), which
  // makes the norm proof's fixed elements a larger part of a smaller
  // report: d again at that noise, and the noise again for that d, until d
  // holds (d only grows, so at most 25 passes).
  for (uint32_t pass = 0; pass <= 24; ++pass) {
    const uint32_t d = sum.log_blocks_per_group;
    FederatedTaskOptions trial = given;
    trial.secure_sum.log_blocks_per_group = d;
    trial.secure_sum.noise_multiplier = sum.noise_multiplier;
    TANDEM_RETURN_IF_ERROR(ApplyNoiseTarget(noise, model_dimension, &trial));
    *task = trial;
    if (!cap || CheckUploadCap(at_dimension(), targets.max_upload_vs_dense).ok()) {
      return absl::OkStatus();
    }
    TANDEM_ASSIGN_OR_RETURN(sum.log_blocks_per_group,
                            LogBlocksForUploadCap(at_dimension(), targets.max_upload_vs_dense));
    if (sum.log_blocks_per_group <= d) break;
  }
  return CheckUploadCap(at_dimension(), targets.max_upload_vs_dense);
}

}  // namespace

absl::Status ApplyTaskTargets(const TaskTargets& targets, uint64_t model_dimension,
                              FederatedTaskOptions* task) {
  FederatedTaskOptions planned = *task;
  TANDEM_RETURN_IF_ERROR(Plan(targets, model_dimension, &planned));
  *task = std::move(planned);
  return absl::OkStatus();
}

}  // namespace tandem::server
