// The coordinator's private rounds planned from a task's targets
// (task_targets.h: encoding.max_upload_vs_dense sets d, privacy.target_epsilon
// the noise multiplier), over the model's parameter count: the initial
// parameters of an opaque model (checked against its layout by
// Coordinator::Create afterwards), else the built model's.
//
// What was planned is kept in the task's store under kPlannedRoundsMeta
// (the targets and the d and z given, then the planned d and z as hex
// floats) and a restart with the same targets and givens reuses it, so the rounds of a task keep
// their noise across upgrades that would calibrate differently; different targets plan anew (the
// task's fingerprint then refuses a changed d or z).
#ifndef TANDEM_SERVER_CORE_COORDINATOR_PLAN_H_
#define TANDEM_SERVER_CORE_COORDINATOR_PLAN_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/core/coordinator.h"
#include "server/store/coordinator_store.h"

namespace tandem::server {

inline constexpr char kPlannedRoundsMeta[] = "planned_private_rounds";

// Sets o->task.secure_sum's d and noise multiplier (and the budget) from
// o's targets, or from the stored plan of the same targets. Returns the
// meta to store once the task's fingerprint is accepted (nullopt: no
// targets, or the stored plan reused). ApplyTaskTargets' errors;
// DATA_LOSS for a malformed stored plan; the store's and the model
// spec's errors.
absl::StatusOr<std::optional<std::string>> PlanPrivateRounds(bool opaque, CoordinatorStore& store,
                                                             CoordinatorOptions* o);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_COORDINATOR_PLAN_H_
