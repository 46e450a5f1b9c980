// The private aggregation of one simulated round, shared by the federations
// of this folder (federation.cc, model_federation.cc): every client's
// packed update encoded as PREAMBLE key shares under a coordinator-signed
// ticket, uploaded to the two real aggregators, and the round finalized and
// decoded through `sum` (the coordinator's side). Returns the decoded mean;
// adds the round's upload bytes (and the baselines of server/core/
// upload_baselines.h: clear FedAvg, dense two-server sharing) and the
// accepted reports to `record`.
// The round's reports are encoded on every core (EncodeReportsEach) and
// each uploaded as soon as it is built, several at a time, so that the
// daemons' work overlaps the encoding. Thread-compatible: one call per round; errors
// of the aggregators propagate.
#ifndef TANDEM_SERVER_SIM_PRIVATE_MEAN_H_
#define TANDEM_SERVER_SIM_PRIVATE_MEAN_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/internal/report_builder.h"
#include "crypto/sign/ed25519.h"
#include "proto/aggregator.pb.h"
#include "server/core/federated_task.h"
#include "server/core/secure_sum.h"
#include "server/sim/federation.h"

namespace tandem::sim {

// One client's two upload requests (leader's, helper's).
struct EncodedReport {
  proto::UploadRequest leader;
  proto::UploadRequest helper;
};

// The reports of `updates` as devices make them, on up to `max_threads`
// threads (oneTBB): per update a ticket signed by `ticket_key` (unsigned
// and without a device key when null) expiring at `expiry`, naming a fresh
// device key, the PREAMBLE key shares and norm proof of
// `builder`, and both requests signed by the device. With crypto_seed != 0
// report i's randomness is a DeterministicRandom of (crypto_seed, round, i)
// alone, so every thread count returns the same bytes; 0 = OpenSSL.
// INVALID_ARGUMENT for max_threads < 1; the first failing update's error
// (builder errors: clipping of non-finite values, sizes).
// EncodeReports one report at a time: `ready(i, report i or its error)` is
// called on the encoding thread that built it, once per update, in no set
// order and from several threads at once (it must be thread-safe).
// INVALID_ARGUMENT for max_threads < 1.
absl::Status EncodeReportsEach(
    const client::ReportBuilder& builder, const std::string& task_id, uint64_t round,
    const std::vector<std::vector<float>>& updates, const crypto::Ed25519SigningKey* ticket_key,
    absl::Time expiry, uint64_t crypto_seed, int max_threads,
    absl::FunctionRef<void(size_t, absl::StatusOr<EncodedReport>)> ready);

absl::StatusOr<std::vector<EncodedReport>> EncodeReports(
    const client::ReportBuilder& builder, const std::string& task_id, uint64_t round,
    const std::vector<std::vector<float>>& updates, const crypto::Ed25519SigningKey* ticket_key,
    absl::Time expiry, uint64_t crypto_seed, int max_threads);

// PrivateMean keeps its channels to the aggregators open for the rounds
// that follow; this closes them (call it before stopping the daemons, whose
// graceful shutdown would otherwise wait on the open connections). Later
// calls of PrivateMean open new ones. Thread-safe.
void CloseAggregatorChannels();

// Opens `round` at both aggregators as the coordinator does (leader, then
// helper). PrivateMean does it first unless told the round is open: a run
// opens it while its cohort trains, as a deployment's coordinator opens
// the round when the round starts and devices train after check-in.
// Thread-safe; the aggregators' errors.
absl::Status OpenPrivateRound(const server::SecureSum& sum, uint64_t round,
                              const AggregatorEndpoints& aggregators);

// `round_open`: OpenPrivateRound(sum, round, aggregators) succeeded already.
absl::StatusOr<std::vector<float>> PrivateMean(const FederationOptions& options,
                                               const server::SecureSum& sum, uint64_t round,
                                               const std::vector<std::vector<float>>& updates,
                                               const AggregatorEndpoints& aggregators,
                                               RoundRecord* record, bool round_open = false);

// The mean of one round's packed updates as the run aggregates them:
// PrivateMean when options.private_aggregation, else the clear mean (what
// clear FedAvg uploads: 4 bytes per value, counted as bytes_up and
// clear_bytes_up; dense_bytes_up says what dense sharing would send). Either way adds the round's
// aggregation time to record->aggregate_seconds. INVALID_ARGUMENT for no updates; PrivateMean's
// errors.
absl::StatusOr<std::vector<float>> RoundMean(const FederationOptions& options,
                                             const server::SecureSum& sum, uint64_t round,
                                             const std::vector<std::vector<float>>& updates,
                                             const AggregatorEndpoints& aggregators,
                                             RoundRecord* record, bool round_open = false);

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

// tandem-sim --max_upload_vs_dense and --target_epsilon (0: off): a private
// run's d, then its noise multiplier for its `rounds` rounds
// (server/core/task_targets.h), pinned into `options` (log_blocks_per_group
// with blocks_fraction 0, noise_multiplier, and epsilon_budget where it was
// 0). ApplyTaskTargets' and SimTaskOptions' errors.
absl::Status ApplySimTargets(double max_upload_vs_dense, double target_epsilon,
                             uint64_t model_dimension, FederationOptions* options);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_PRIVATE_MEAN_H_
