// tandem-sim's process mode: the whole federation as real processes on
// loopback — tandem-coordinator and N tandem-client processes (the two
// aggregators are already running) — driven only through the binaries'
// flags and the coordinator's Status RPC, exactly as an operator would.
// Each variant gets its own coordinator (fresh state directory and task id).
#ifndef TANDEM_SERVER_SIM_PROCESS_FEDERATION_H_
#define TANDEM_SERVER_SIM_PROCESS_FEDERATION_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/sim/federation.h"

namespace tandem::sim {

struct ProcessOptions {
  std::string coordinator_bin;
  std::string client_bin;
  std::string dataset = "fmnist";
  int64_t train_items = 0;       // per client process (fmnist), 0 = all
  int64_t eval_items = 2000;
  int64_t input_dim = 0;         // of the dataset (for the dense-upload comparison)
  int64_t num_classes = 0;
  std::string work_dir;          // state and logs of the processes
  double enrollment_s = 3.0;     // check-in window of a round
  double round_timeout_s = 120;  // deadline of a round
};

// Runs one variant (o.private_aggregation must be true: the coordinator
// always aggregates through PREAMBLE; noise_multiplier 0 turns DP off).
// The model must be "mlp" (INVALID_ARGUMENT otherwise: the coordinator
// serves MLPs); the block selection and d (LogBlocksPerGroup) go to the
// coordinator's flags, and each tandem-client keeps its own error feedback.
// Calls `progress` once per released round.
absl::StatusOr<std::vector<RoundRecord>> RunProcessFederation(
    const FederationOptions& o, const ProcessOptions& p, const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_PROCESS_FEDERATION_H_
