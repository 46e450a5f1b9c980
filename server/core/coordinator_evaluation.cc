// The coordinator's federated evaluation rounds (federated_evaluation.h):
// every options_.evaluation.every released versions, one aggregation round
// of the task in which the sampled clients evaluate that version on their
// held-out examples. Cohort sampling, tickets, device checks, uploads and
// the aggregators' policy and accounting are those of a training round;
// the round releases metrics, not a model, and is charged to the task's
// accountant before it opens.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "server/core/coordinator.h"

namespace tandem::server {

double Coordinator::EvaluationNoise() const {
  return options_.evaluation.noise_multiplier < 0 ? options_.task.secure_sum.noise_multiplier
                                                  : options_.evaluation.noise_multiplier;
}

bool Coordinator::EvaluationDue() const {
  const uint64_t version = task_->completed_rounds();
  return options_.evaluation.every > 0 && version > 0 && version % options_.evaluation.every == 0 &&
         last_evaluated_version_ < version;
}

proto::EvaluationConfig Coordinator::ClientEvaluationConfig() const {
  return EvaluationConfigOf(options_.evaluation,
                            static_cast<uint32_t>(options_.model.num_classes()));
}

absl::Status Coordinator::PlanEvaluation() {
  TANDEM_ASSIGN_OR_RETURN(const double epsilon, task_->ChargeEvaluation(EvaluationNoise()));
  TANDEM_ASSIGN_OR_RETURN(
      SecureSum sum,
      EvaluationSum(options_.task.secure_sum, static_cast<uint32_t>(options_.model.num_classes()),
                    EvaluationNoise()));
  eval_sum_.emplace(std::move(sum));
  eval_epsilon_after_ = epsilon;
  return absl::OkStatus();
}

absl::Status Coordinator::StartEvaluation() {
  const uint64_t version = task_->completed_rounds();
  if (absl::Status s = PlanEvaluation(); absl::IsResourceExhausted(s)) {
    // The budget cannot pay for it: the version stays unevaluated and the
    // task goes on (its next training round will find the budget spent).
    TANDEM_LOG(WARNING) << "coordinator: no federated evaluation of version " << version << ": "
                        << s.message();
    last_evaluated_version_ = version;
    return absl::OkStatus();
  } else if (!s.ok()) {
    return s;
  }
  // The charge is in memory until the round ends (FinishRound/AbandonRound
  // checkpoint it); a failure to begin leaves it there, as a restart would
  // charge again anyway (conservative).
  absl::StatusOr<OpenRoundRecord> rec = BeginAggregationRound(version);
  if (!rec.ok()) {
    eval_sum_.reset();
    return rec.status();
  }
  EnterOpening(*rec);
  return absl::OkStatus();
}

absl::Status Coordinator::FinalizeEvaluation(uint64_t round, proto::RoundSummary summary) {
  const proto::FederatedEvaluation& e = summary.evaluation();
  summary.set_model_version(task_->completed_rounds());
  summary.set_aggregation_round(round);
  summary.set_accepted_reports(e.reports());
  summary.set_accuracy(e.accuracy());
  summary.set_loss(e.loss());
  summary.set_epsilon(eval_epsilon_after_);
  summary.set_evaluated_by("federated");
  TANDEM_ASSIGN_OR_RETURN(proto::TaskCheckpoint cp, task_->Checkpoint());
  {
    absl::MutexLock lock(&mu_);
    summary.set_bytes_down(round_bytes_down_);
    summary.set_seconds(static_cast<double>(NowMs() - opened_ms_) / 1000.0);
    TANDEM_RETURN_IF_ERROR(Stored(store_->FinishRound(round, cp, summary)));
    TANDEM_LOG(INFO) << "coordinator: federated evaluation of version " << e.model_version()
                     << " from " << e.reports() << " reports: accuracy " << e.accuracy()
                     << ", loss " << e.loss() << " over ~" << e.examples() << " examples (noise sd "
                     << e.count_stddev() << " examples), epsilon " << eval_epsilon_after_;
    last_evaluation_ = e;
    history_.push_back(std::move(summary));
    epsilon_ = task_->epsilon_spent();
    assigned_.clear();
    phase_ = Phase::kIdle;
  }
  eval_sum_.reset();
  last_evaluated_version_ = task_->completed_rounds();
  return absl::OkStatus();
}

}  // namespace tandem::server
