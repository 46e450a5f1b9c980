#include "server/core/federated_task.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
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
    // A PREAMBLE round whose clients pick their blocks at random is also
    // amplified by that sampling (crypto/dp/block_sampling.h).
    const int64_t blocks = plan.sum->sampled_blocks_per_group();
    absl::Status s = accountant_->Charge(options_.sample_rate, cfg.noise_multiplier, 1, blocks);
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

absl::StatusOr<double> FederatedTask::ChargeEvaluation(double noise_multiplier) {
  if (plan_open_) return absl::FailedPreconditionError("a training round is planned");
  if (!accountant_.has_value()) return 0.0;
  absl::Status s = accountant_->Charge(options_.sample_rate, noise_multiplier, 1);
  if (absl::IsResourceExhausted(s)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "privacy budget spent: the evaluation of version ", completed_, " would exceed epsilon ",
        options_.epsilon_budget, " (spent ", accountant_->SpentEpsilon(), ")"));
  }
  TANDEM_RETURN_IF_ERROR(s);
  return accountant_->SpentEpsilon();
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

absl::Status FederatedTask::AbandonRound() {
  if (!plan_open_) return absl::FailedPreconditionError("no round planned");
  plan_open_ = false;
  return absl::OkStatus();
}

absl::StatusOr<proto::TaskCheckpoint> FederatedTask::Checkpoint() {
  if (plan_open_) return absl::FailedPreconditionError("cannot checkpoint with a round planned");
  proto::TaskCheckpoint c;
  c.set_completed_rounds(completed_);
  c.mutable_params()->Add(params_.begin(), params_.end());
  const ml::Optimizer::State os = optimizer_->SaveState();
  c.set_optimizer_steps(os.steps);
  c.set_optimizer_size(os.size);
  for (const std::vector<float>& b : os.buffers) {
    c.add_optimizer_buffers()->mutable_values()->Add(b.begin(), b.end());
  }
  const ml::FedLuarState::Snapshot ls = luar_->Save();
  c.set_fedluar_round(ls.round);
  for (size_t i : ls.recycled) c.add_fedluar_recycled(i);
  c.mutable_fedluar_scores()->Add(ls.scores.begin(), ls.scores.end());
  c.mutable_fedluar_last_update()->Add(ls.last_update.begin(), ls.last_update.end());
  if (accountant_.has_value()) c.set_accountant(accountant_->Serialize());
  return c;
}

absl::Status FederatedTask::Restore(const proto::TaskCheckpoint& c) {
  if (plan_open_) return absl::FailedPreconditionError("cannot restore with a round planned");
  if (static_cast<size_t>(c.params_size()) != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", c.params_size(),
                                                   " parameters, the model ", params_.size()));
  }
  for (float p : c.params()) {
    if (!std::isfinite(p)) return absl::InvalidArgumentError("checkpoint has non-finite params");
  }
  if (c.accountant().empty() != !accountant_.has_value()) {
    return absl::InvalidArgumentError("checkpoint and task disagree on differential privacy");
  }
  std::optional<dp::PrivacyAccountant> accountant;
  if (!c.accountant().empty()) {
    TANDEM_ASSIGN_OR_RETURN(dp::PrivacyAccountant a,
                            dp::PrivacyAccountant::Deserialize(c.accountant()));
    accountant.emplace(std::move(a));
  }
  ml::FedLuarState::Snapshot ls;
  ls.round = c.fedluar_round();
  ls.recycled.assign(c.fedluar_recycled().begin(), c.fedluar_recycled().end());
  ls.scores.assign(c.fedluar_scores().begin(), c.fedluar_scores().end());
  ls.last_update.assign(c.fedluar_last_update().begin(), c.fedluar_last_update().end());
  ml::Optimizer::State os;
  os.steps = c.optimizer_steps();
  os.size = c.optimizer_size();
  for (const proto::FloatBuffer& b : c.optimizer_buffers()) {
    os.buffers.emplace_back(b.values().begin(), b.values().end());
  }
  // Validate both before changing either (all or nothing).
  const ml::FedLuarState::Snapshot old_luar = luar_->Save();
  TANDEM_RETURN_IF_ERROR(luar_->Restore(std::move(ls)));
  const ml::Optimizer::State old_opt = optimizer_->SaveState();
  if (absl::Status s = optimizer_->RestoreState(os); !s.ok()) {
    TANDEM_CHECK(luar_->Restore(old_luar).ok());
    TANDEM_CHECK(optimizer_->RestoreState(old_opt).ok());
    return s;
  }
  params_.assign(c.params().begin(), c.params().end());
  completed_ = c.completed_rounds();
  if (accountant.has_value()) accountant_ = std::move(accountant);
  return absl::OkStatus();
}

}  // namespace tandem::server
