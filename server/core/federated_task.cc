#include "server/core/federated_task.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<FederatedTask>> FederatedTask::Create(
    FederatedTaskOptions options, std::vector<ml::TensorSlice> tensors,
    std::vector<float> initial_params) {
  if (!(options.sample_rate > 0 && options.sample_rate <= 1)) {
    return absl::InvalidArgumentError("sample_rate must be in (0, 1]");
  }
  if (!(options.server_lr > 0) || !std::isfinite(options.server_lr)) {
    return absl::InvalidArgumentError("server_lr must be finite and > 0");
  }
  ml::FedLuarOptions lo;
  lo.num_recycled = options.num_recycled;
  lo.seed = options.seed;
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<ml::FedLuarState> luar,
      ml::FedLuarState::Create(std::move(tensors), static_cast<int64_t>(initial_params.size()), lo));
  std::unique_ptr<ml::Optimizer> opt;
  switch (options.optimizer) {
    case ServerOptimizer::kFedAvg: {
      ml::SgdOptions o;
      o.learning_rate = options.server_lr;
      TANDEM_ASSIGN_OR_RETURN(opt, ml::CreateSgd(o));
      break;
    }
    case ServerOptimizer::kFedAdam: {
      ml::AdamOptions o;
      o.learning_rate = options.server_lr;
      o.epsilon = 1e-3;  // FedAdam's tau (Reddi et al. 2021 use 1e-3)
      TANDEM_ASSIGN_OR_RETURN(opt, ml::CreateAdam(o));
      break;
    }
    case ServerOptimizer::kDana: {
      ml::DanaOptions o;
      o.gamma2 = options.server_lr;
      TANDEM_ASSIGN_OR_RETURN(opt, ml::CreateDana(o));
      break;
    }
  }
  std::optional<dp::PrivacyAccountant> accountant;
  if (options.secure_sum.noise_multiplier > 0) {
    dp::AccountantOptions ao;
    ao.delta = options.delta;
    // Without a budget the ledger still records what is spent.
    ao.epsilon_budget = options.epsilon_budget > 0 ? options.epsilon_budget : 1e12;
    TANDEM_ASSIGN_OR_RETURN(dp::PrivacyAccountant a, dp::PrivacyAccountant::Create(ao));
    accountant.emplace(std::move(a));
  } else if (options.epsilon_budget > 0) {
    return absl::InvalidArgumentError("an epsilon budget needs noise_multiplier > 0");
  }
  return std::unique_ptr<FederatedTask>(new FederatedTask(
      std::move(options), std::move(initial_params), std::move(luar), std::move(opt),
      std::move(accountant)));
}

double FederatedTask::epsilon_spent() const {
  return accountant_.has_value() ? accountant_->SpentEpsilon() : 0.0;
}

absl::StatusOr<RoundPlan> FederatedTask::PlanRound() {
  if (plan_open_) return absl::FailedPreconditionError("a round is already planned");
  RoundPlan plan;
  plan.round_id = completed_ + 1;
  plan.recycled = luar_->recycled();
  plan.packed_size = luar_->packed_size();
  SecureSumConfig cfg = options_.secure_sum;
  cfg.model_dimension = static_cast<uint64_t>(plan.packed_size);
  TANDEM_ASSIGN_OR_RETURN(SecureSum sum, SecureSum::Create(cfg));
  plan.sum.emplace(std::move(sum));
  if (accountant_.has_value()) {
    // Charged before anything is released: a refused round releases nothing.
    absl::Status s = accountant_->Charge(options_.sample_rate, cfg.noise_multiplier, 1);
    if (absl::IsResourceExhausted(s)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "privacy budget spent: round ", plan.round_id, " would exceed epsilon ",
          options_.epsilon_budget, " (spent ", accountant_->SpentEpsilon(), ")"));
    }
    TANDEM_RETURN_IF_ERROR(s);
    plan.epsilon_after = accountant_->SpentEpsilon();
  }
  plan_open_ = true;
  return plan;
}

absl::StatusOr<std::vector<float>> FederatedTask::PackUpdate(absl::Span<const float> full) const {
  return luar_->PackUpdate(full);
}

absl::Status FederatedTask::FinishRound(absl::Span<const float> packed_mean) {
  if (!plan_open_) return absl::FailedPreconditionError("no round planned");
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> full, luar_->FinishRound(params_, packed_mean));
  // Server optimizers see the pseudo-gradient -update (Reddi et al. 2021).
  for (float& g : full) g = -g;
  TANDEM_RETURN_IF_ERROR(optimizer_->Step(absl::MakeSpan(params_), full));
  ++completed_;
  plan_open_ = false;
  return absl::OkStatus();
}

}  // namespace tandem::server
