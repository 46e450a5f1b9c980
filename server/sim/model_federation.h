// A federation whose model and local training live outside tandem: the
// model is a flat float vector cut into named tensors, the local training
// step and the held-out evaluation are callbacks (the `tandem` Python
// package passes a PyTorch/NumPy model's training here, python/src/sim.cc).
// Everything else is RunFederation's (federation.h): Poisson cohort
// sampling with rate q, the coordinator's FederatedTask (FedAvg or FedLUAR
// server side, server learning rate, privacy accounting and budget), and
// private rounds through the two real tandem-aggregator daemons (PREAMBLE
// reports under signed tickets, norm proofs, each server's discrete
// Gaussian noise), or the clear-text mean when private_aggregation is off.
//
// Of FederationOptions this uses name, fedluar, num_recycled,
// private_aggregation, rounds, clients, sample_rate, server_lr, block_size,
// log_blocks_per_group, blocks_fraction, block_selection (TOP_NORM with the
// clients' error feedback, client_memory.h), clip_l2_norm, noise_multiplier, delta,
// epsilon_budget, norm_proofs, min_batch_size, seed and crypto_seed; the
// training settings (local_steps, batch_size, client_lr, hidden, model, coido,
// dirichlet_alpha, threads) are the callbacks' business.
// Thread safety: the callbacks are called from the calling thread, one at a
// time, in cohort order.
#ifndef TANDEM_SERVER_SIM_MODEL_FEDERATION_H_
#define TANDEM_SERVER_SIM_MODEL_FEDERATION_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/fedluar/fedluar.h"
#include "server/sim/federation.h"

namespace tandem::sim {

struct ExternalModel {
  std::vector<ml::TensorSlice> tensors;  // covering initial_params in order
  std::vector<float> initial_params;
};

// Client `client` (in [0, clients)) trains from the global `params` in
// round `round` (1-based) and returns its update (trained minus global,
// params.size() floats, finite). An error ends the run with that error.
using LocalTrainFn = std::function<absl::StatusOr<std::vector<float>>(
    int client, int round, absl::Span<const float> params)>;

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};
// Held-out evaluation of the global model after round `round`. May be
// empty (then accuracy and loss are recorded as 0).
using EvaluateFn =
    std::function<absl::StatusOr<Evaluation>(int round, absl::Span<const float> params)>;

struct ModelFederationResult {
  std::vector<RoundRecord> records;
  std::vector<float> final_params;
};

// INVALID_ARGUMENT for bad options, tensors that do not cover the model, or
// an update of the wrong size or with non-finite values; the aggregators'
// and callbacks' errors propagate. Stops early (without error) once the
// privacy budget would be exceeded.
absl::StatusOr<ModelFederationResult> RunModelFederation(
    const FederationOptions& options, const ExternalModel& model, const LocalTrainFn& train,
    const EvaluateFn& evaluate, const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_MODEL_FEDERATION_H_
