// In-process simulation of federated rounds (FedAvg or FedAvg + FedLUAR)
// with bytes-uploaded accounting. Used by tests and by the simulator.
//
// One round: sample `clients_per_round` clients uniformly without
// replacement; each starts from the global model, runs `local_steps` SGD
// steps (momentum, batch `batch_size`) on its own data, and uploads
// (local - global), minus the recycled tensors under FedLUAR. The server
// averages the uploads uniformly (as FedLUAR's reference allreduce does),
// reconstructs recycled tensors from the last update and applies
// global += server_lr * update. Everything is seeded: same inputs, same
// result.
#ifndef TANDEM_ML_FEDLUAR_FEDERATED_SIM_H_
#define TANDEM_ML_FEDLUAR_FEDERATED_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/data/dataset.h"
#include "ml/fedluar/fedluar.h"
#include "ml/model/model.h"

namespace tandem::ml {

enum class FederatedAlgorithm { kFedAvg, kFedLuar };

struct FederatedOptions {
  FederatedAlgorithm algorithm = FederatedAlgorithm::kFedAvg;
  int rounds = 10;
  int clients_per_round = 4;
  int local_steps = 20;       // FedLUAR reference: average_interval = 20
  int64_t batch_size = 32;
  double client_lr = 0.05;
  double client_momentum = 0.9;
  double server_lr = 1.0;
  int num_recycled = 0;       // FedLUAR R
  uint64_t seed = 1;
  int num_threads = 1;        // gradient shards per client step
  int eval_every = 1;         // evaluate the global model every N rounds (and the last)
};

struct RoundMetrics {
  int round = 0;
  double test_accuracy = -1;  // -1 when not evaluated this round
  double test_loss = -1;
  int64_t bytes_uploaded = 0;  // float32 payload of all clients this round
  std::vector<std::string> recycled;  // tensor names not uploaded this round
};

struct FederatedResult {
  std::vector<RoundMetrics> rounds;
  int64_t total_bytes = 0;
  double final_accuracy = 0;
  std::vector<float> final_params;
};

// Tensor table of a model (or of its parameter layout) for FedLuarState.
std::vector<TensorSlice> TensorSlices(const std::vector<ParamInfo>& layout);
std::vector<TensorSlice> TensorSlices(const Model& model);

// Runs the federation from `initial` (not modified). INVALID_ARGUMENT for
// bad options (rounds < 1, clients_per_round outside [1, clients], ...),
// empty client data, or data that does not fit the model.
absl::StatusOr<FederatedResult> SimulateFederated(const Model& initial,
                                                  const std::vector<Dataset>& clients,
                                                  const Dataset& test,
                                                  const FederatedOptions& options);

}  // namespace tandem::ml

#endif  // TANDEM_ML_FEDLUAR_FEDERATED_SIM_H_
