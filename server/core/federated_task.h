// The coordinator's state of one federated task, round after round: the
// global model, FedLUAR's server side (scores, the recycled set drawn from
// a seed every party shares, reconstruction of recycled tensors from the
// last update; Kim, Kang & Lee, NeurIPS 2025), the server optimizer
// (FedAvg, FedAdam or DANA applied to the pseudo-gradient -mean update) and
// the privacy ledger (RDP of the Poisson-subsampled Gaussian), which is
// charged before a round is opened so that no release ever exceeds the
// budget.
//
//   PlanRound()   -> the round's SecureSum (over the packed, non-recycled
//                    coordinates) and the recycled tensors; charges the
//                    accountant; RESOURCE_EXHAUSTED when the budget is spent.
//   FinishRound() -> applies the decoded mean update.
//
// Not thread-safe: the coordinator serialises rounds of a task.
#ifndef TANDEM_SERVER_CORE_FEDERATED_TASK_H_
#define TANDEM_SERVER_CORE_FEDERATED_TASK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/dp/accountant.h"
#include "ml/fedluar/fedluar.h"
#include "ml/optim/optimizer.h"
#include "proto/coordinator.pb.h"
#include "server/core/secure_sum.h"

namespace tandem::server {

enum class ServerOptimizer { kFedAvg, kFedAdam, kDana };

struct FederatedTaskOptions {
  SecureSumConfig secure_sum;  // model_dimension is set per round (packed size)
  ServerOptimizer optimizer = ServerOptimizer::kFedAvg;
  double server_lr = 1.0;
  int num_recycled = 0;        // FedLUAR R (0 = plain FedAvg uploads)
  uint64_t seed = 0;           // FedLUAR draw seed shared by all parties
  double sample_rate = 0.1;    // q of the cohort sampling (what is charged)
  double delta = 1e-5;
  double epsilon_budget = 0;   // 0 = no budget (still accounted when noise is on)
};

struct RoundPlan {
  uint64_t round_id = 0;
  std::vector<size_t> recycled;  // tensor indices not uploaded this round
  int64_t packed_size = 0;       // floats each client uploads
  std::optional<SecureSum> sum;  // the round's private aggregation
  double epsilon_after = 0;      // epsilon once this round is released
};

class FederatedTask {
 public:
  // INVALID_ARGUMENT for inconsistent tensors/params or options.
  static absl::StatusOr<std::unique_ptr<FederatedTask>> Create(
      FederatedTaskOptions options, std::vector<ml::TensorSlice> tensors,
      std::vector<float> initial_params);

  // REQUIRES no plan open. RESOURCE_EXHAUSTED when the next round would
  // overspend the budget (nothing charged).
  absl::StatusOr<RoundPlan> PlanRound();
  // Charges one federated-evaluation release (federated_evaluation.h) at
  // noise multiplier `noise_multiplier` and the task's sampling rate, before
  // the round opens; returns the epsilon after it (0 without DP).
  // RESOURCE_EXHAUSTED when it would overspend the budget (nothing
  // charged), FAILED_PRECONDITION while a training round is planned. The
  // charge is in the next Checkpoint(): after a restart an open evaluation
  // round is charged again from the checkpoint before it, like PlanRound.
  absl::StatusOr<double> ChargeEvaluation(double noise_multiplier);
  // Drops recycled tensors from a client's full update (client side of the
  // plan; INVALID_ARGUMENT on a size mismatch).
  absl::StatusOr<std::vector<float>> PackUpdate(absl::Span<const float> full) const;
  // Applies the decoded mean of the packed updates. FAILED_PRECONDITION
  // without an open plan; INVALID_ARGUMENT on a size mismatch.
  absl::Status FinishRound(absl::Span<const float> packed_mean);
  // Closes the open plan without a release (quorum missed, aggregation
  // failed). The privacy charge stays: conservative, since nothing was
  // released. FAILED_PRECONDITION without an open plan.
  absl::Status AbandonRound();

  // Everything needed to continue after a restart (no plan may be open:
  // FAILED_PRECONDITION). Restore() returns INVALID_ARGUMENT for a
  // checkpoint of another model or optimizer; on error nothing changes.
  absl::StatusOr<proto::TaskCheckpoint> Checkpoint();
  absl::Status Restore(const proto::TaskCheckpoint& checkpoint);

  absl::Span<const float> params() const { return params_; }
  uint64_t completed_rounds() const { return completed_; }
  bool plan_open() const { return plan_open_; }
  double epsilon_spent() const;
  const ml::FedLuarState& fedluar() const { return *luar_; }

 private:
  FederatedTask(FederatedTaskOptions options, std::vector<float> params,
                std::unique_ptr<ml::FedLuarState> luar, std::unique_ptr<ml::Optimizer> opt,
                std::optional<dp::PrivacyAccountant> accountant)
      : options_(std::move(options)),
        params_(std::move(params)),
        luar_(std::move(luar)),
        optimizer_(std::move(opt)),
        accountant_(std::move(accountant)) {}

  FederatedTaskOptions options_;
  std::vector<float> params_;
  std::unique_ptr<ml::FedLuarState> luar_;
  std::unique_ptr<ml::Optimizer> optimizer_;
  std::optional<dp::PrivacyAccountant> accountant_;  // set when noise is on
  uint64_t completed_ = 0;
  bool plan_open_ = false;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_FEDERATED_TASK_H_
