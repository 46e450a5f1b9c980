// What a task's private rounds must keep, turned into their parameters
// before the first round: d from the bytes a client may send
// (max_upload_vs_dense: upload_cap.h), then the noise multiplier from the
// epsilon the planned releases may spend (target_epsilon:
// noise_calibration.h, crediting the block sampling of that d); where that
// noise narrows the values (64 -> 32 bits) and the cap no longer holds, d
// again at that noise and the noise again for it.
// TaskSpec encoding.max_upload_vs_dense and privacy.target_epsilon, the
// daemons' and tandem-sim's flags of the same names.
//
// Pure; thread-compatible.
#ifndef TANDEM_SERVER_CORE_TASK_TARGETS_H_
#define TANDEM_SERVER_CORE_TASK_TARGETS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/core/federated_task.h"

namespace tandem::server {

struct TaskTargets {
  double max_upload_vs_dense = 0;           // > 0: sets d; 0: d as given
  double target_epsilon = 0;                // > 0: sets z; 0: z as given
  uint64_t rounds = 0;                      // training rounds planned
  uint64_t evaluations = 0;                 // private evaluation rounds planned
  double evaluation_noise_multiplier = -1;  // < 0: the calibrated z
};

// Sets task->secure_sum.log_blocks_per_group and noise_multiplier (and the
// budget, see ApplyNoiseTarget) for a model of `model_dimension`
// parameters; neither target set, or an error: nothing changes. The errors of
// LogBlocksForUploadCap, ApplyNoiseTarget and CheckUploadCap (INVALID_ARGUMENT
// for targets that are negative or not finite, or a cap no d meets at the
// calibrated noise; NOT_FOUND for an epsilon no noise reaches).
absl::Status ApplyTaskTargets(const TaskTargets& targets, uint64_t model_dimension,
                              FederatedTaskOptions* task);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_TASK_TARGETS_H_
