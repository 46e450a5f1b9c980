// Private federated evaluation (issue 33 item 5): every `every` released
// versions, a round in which the sampled clients evaluate the current model
// on their own held-out examples and send their metrics (examples, correct,
// loss sum, per-class examples and correct) through the same two
// aggregators as an update, each server adding its own noise, the task's
// accountant charging the release like a training round's.
//
// Sensitivity [I; the flat-count analogue of per-user clipping in user-level
// DP, e.g. McMahan et al., ICLR 2018]: a client counts at most m =
// max_examples examples and clips each example's loss to [0, L]; dividing
// every entry by m (the loss sum by m L) bounds its metrics vector's L2 norm
// by sqrt(5) (examples, correct, loss each <= 1; the per-class examples and
// the per-class correct each sum to <= 1, so each block's L2 norm is <= 1).
// That bound is the round's clip, proved by every report's norm proof, and
// the noise of each aggregator is z * sqrt(5) in these units, i.e. a
// standard deviation of sqrt(2) * z * sqrt(5) * m examples on each decoded
// count with both servers' noise. Accuracy and mean loss are ratios of two
// noised sums (post-processing). With m = 100, z = 1 that is ~316
// examples: a federated evaluation is precise over thousands of clients,
// not ten, and the figure says so next to the value.
//
// Thread safety: free functions over values.
#ifndef TANDEM_SERVER_CORE_FEDERATED_EVALUATION_H_
#define TANDEM_SERVER_CORE_FEDERATED_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "server/core/secure_sum.h"

namespace tandem::server {

struct FederatedEvaluationOptions {
  uint32_t every = 0;            // evaluate every `every` released versions (0 = never)
  uint32_t max_examples = 100;   // m
  double loss_clip = 10.0;       // L (nats)
  double noise_multiplier = -1;  // z of evaluation rounds; < 0: the training rounds'
};

// Entries of the version-1 metrics vector: 3 + 2 C.
uint64_t MetricsDimension(uint32_t num_classes);
// The L2 bound of a client's metrics vector: sqrt(5).
double MetricsL2Bound();

// INVALID_ARGUMENT for m = 0 or above 10^6, L not in (0, 1000], C < 2.
absl::Status ValidateEvaluationOptions(const FederatedEvaluationOptions& options,
                                       uint32_t num_classes);

// What an evaluation round's clients receive.
proto::EvaluationConfig EvaluationConfigOf(const FederatedEvaluationOptions& options,
                                           uint32_t num_classes);

// The SecureSum of an evaluation round: the training rounds' task, fixed
// point, norm proofs, batch and report limits, with the metrics vector as
// the dimension, every value sent (one block per group), clip sqrt(5) and
// noise multiplier `noise_multiplier`.
absl::StatusOr<SecureSum> EvaluationSum(const SecureSumConfig& training, uint32_t num_classes,
                                        double noise_multiplier);

// The decoded sum of the metrics vectors (in the vector's units) -> the
// recorded evaluation in examples, with each sum's noise standard deviation
// computed from the round's parameters (both servers' noise).
// INVALID_ARGUMENT for a sum of the wrong length.
absl::StatusOr<proto::FederatedEvaluation> DecodeEvaluation(const DecodedAggregate& aggregate,
                                                            const proto::RoundParameters& round,
                                                            const proto::EvaluationConfig& config,
                                                            uint64_t model_version);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_FEDERATED_EVALUATION_H_
