// The private aggregation of one simulated round, shared by the federations
// of this folder (federation.cc, model_federation.cc): every client's
// packed update encoded as PREAMBLE key shares under a coordinator-signed
// ticket, uploaded to the two real aggregators, and the round finalized and
// decoded through `sum` (the coordinator's side). Returns the decoded mean;
// adds the round's upload bytes (and what dense two-server secret sharing
// would send) and the accepted reports to `record`.
// Thread-compatible: one call per round; errors of the aggregators propagate.
#ifndef TANDEM_SERVER_SIM_PRIVATE_MEAN_H_
#define TANDEM_SERVER_SIM_PRIVATE_MEAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/federated_task.h"
#include "server/core/secure_sum.h"
#include "server/sim/federation.h"

namespace tandem::sim {

absl::StatusOr<std::vector<float>> PrivateMean(const FederationOptions& options,
                                               const server::SecureSum& sum, uint64_t round,
                                               const std::vector<std::vector<float>>& updates,
                                               const AggregatorEndpoints& aggregators,
                                               RoundRecord* record);

// The mean of one round's packed updates as the run aggregates them:
// PrivateMean when options.private_aggregation, else the clear mean (what
// clear FedAvg uploads: 4 bytes per value, counted as both bytes_up and
// dense_bytes_up). Either way adds the round's aggregation time to
// record->aggregate_seconds. INVALID_ARGUMENT for no updates; PrivateMean's
// errors.
absl::StatusOr<std::vector<float>> RoundMean(const FederationOptions& options,
                                             const server::SecureSum& sum, uint64_t round,
                                             const std::vector<std::vector<float>>& updates,
                                             const AggregatorEndpoints& aggregators,
                                             RoundRecord* record);

// The aggregators' round id of a run's round `round` (see
// FederationOptions::task_id): `round` under a run's own task id, else
// run_start_unix_ms * 1000 + round.
uint64_t AggregationRoundOf(const FederationOptions& options, uint64_t round,
                            int64_t run_start_unix_ms);

// The coordinator-side task of a simulated run of `options` over a model of
// `model_dimension` parameters (secure sum, FedLUAR, server optimizer,
// accountant), under options.task_id or else a fresh task id, so that
// reruns against long-lived daemons never collide with the replay
// protection of an earlier run.
// Private runs take d and the block selection from the options
// (LogBlocksPerGroup); the clear baseline keeps log_blocks_per_group and
// RANDOM (its SecureSum is never used). LogBlocksPerGroup's errors; errors
// of the OpenSSL randomness.
absl::StatusOr<server::FederatedTaskOptions> SimTaskOptions(const FederationOptions& options,
                                                            uint64_t model_dimension);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_PRIVATE_MEAN_H_
