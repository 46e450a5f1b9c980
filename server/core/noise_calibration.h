// A task's noise from the privacy it must keep: given a target epsilon
// (TaskSpec privacy.target_epsilon, tandem-coordinator and tandem-sim
// --target_epsilon), the least noise multiplier z for which every release
// the task plans stays within it, at the task's delta (crypto/dp/calibration.h).
//
// The plan: `rounds` training rounds at the task's sampling rate q, each
// credited with PREAMBLE's block sampling where its clients pick one of
// 2^d blocks per group at random (RdpBlockSampledGaussian,
// crypto/dp/block_sampling.h; the PREAMBLE paper's amplification: the
// same epsilon with less noise), and `evaluations` private evaluation
// rounds (no block sampling) at their own noise or at the calibrated one.
//
// Which encoding a round uses depends on z itself (`auto` compares the
// bytes of both encodings at the value width the noise allows), so the
// calibration is a fixed point: blocks per group at the current z, the z
// for them, again until the rounds at that z sample at least the blocks
// credited (never more amplification credited than the rounds get). With
// FedLUAR and `auto` the packed size, and so the encoding, changes round by
// round: no block sampling is credited there. The ledger charges what each
// round really is and, with the budget defaulting to the target, refuses a
// round that would overspend (federated_task.h).
//
// Pure; thread-compatible.
#ifndef TANDEM_SERVER_CORE_NOISE_CALIBRATION_H_
#define TANDEM_SERVER_CORE_NOISE_CALIBRATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/core/federated_task.h"

namespace tandem::server {

struct NoiseTarget {
  double target_epsilon = 0;                // > 0
  uint64_t rounds = 0;                      // training rounds planned, >= 1
  uint64_t evaluations = 0;                 // private evaluation rounds planned
  double evaluation_noise_multiplier = -1;  // < 0: the calibrated z; else their own (> 0)
};

// Sets task->secure_sum.noise_multiplier to the calibrated z, and
// task->epsilon_budget to the target where it is 0 (a set budget is kept:
// it may only be smaller). `model_dimension` is the model's parameter
// count (the first round's D). INVALID_ARGUMENT for a target that is not
// finite and > 0, no rounds, a budget above the target, a zero evaluation
// noise or what SecureSum::Create refuses; NOT_FOUND when no z <= 1e6
// reaches the target.
absl::Status ApplyNoiseTarget(const NoiseTarget& target, uint64_t model_dimension,
                              FederatedTaskOptions* task);

// The budget of a task with a target epsilon: the target where `budget` is
// 0, else `budget`; INVALID_ARGUMENT when `budget` exceeds the target.
absl::StatusOr<double> BudgetForTarget(double budget, double target_epsilon);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_NOISE_CALIBRATION_H_
