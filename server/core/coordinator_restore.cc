// The coordinator's releases and restart: recording a release
// (RecordRelease), the published model blob, the safetensors file of every
// released version (released_models.h), the held-out evaluation of a
// release, Restore() from the store after a (re)start, and RecoverFromStore
// after a release that could not be recorded.
#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "server/core/coordinator.h"
#include "server/core/released_models.h"

namespace tandem::server {

void Coordinator::PublishModel() {
  proto::Model m;
  m.set_version(task_->completed_rounds());
  proto::Tensor* t = m.add_layers();
  t->set_name("params");
  t->set_dtype(proto::DTYPE_FLOAT32);
  const absl::Span<const float> p = task_->params();
  t->add_shape(static_cast<int64_t>(p.size()));
  t->set_data(std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float)));
  model_blob_ = std::make_shared<const std::string>(m.SerializeAsString());
  model_version_ = task_->completed_rounds();
}

absl::Status Coordinator::Restore() {
  TANDEM_ASSIGN_OR_RETURN(std::optional<proto::TaskCheckpoint> cp, store_->LoadCheckpoint());
  TANDEM_RETURN_IF_ERROR(task_->Restore(cp.has_value() ? *cp : initial_checkpoint_));
  TANDEM_ASSIGN_OR_RETURN(std::vector<proto::RoundSummary> history, store_->LoadHistory());
  TANDEM_ASSIGN_OR_RETURN(std::optional<OpenRoundRecord> open, store_->LoadOpenRound());
  plan_.reset();
  eval_sum_.reset();
  absl::MutexLock lock(&mu_);
  // What memory held beyond the store (RecoverFromStore) goes.
  assigned_.clear();
  resumed_round_ = false;
  phase_ = Phase::kIdle;
  history_ = std::move(history);
  for (const proto::RoundSummary& r : history_) {
    if (!r.has_evaluation()) continue;
    last_evaluated_version_ = std::max(last_evaluated_version_, r.model_version());
    last_evaluation_ = r.evaluation();
  }
  epsilon_ = task_->epsilon_spent();
  // A crash between the release and its file: write it now, before the
  // version is served.
  WriteReleasedModelFile(/*only_if_missing=*/true);
  PublishModel();
  if (!open.has_value()) return absl::OkStatus();
  const bool evaluation =
      options_.evaluation.every > 0 && open->model_version == task_->completed_rounds();
  if (evaluation) {
    TANDEM_RETURN_IF_ERROR(PlanEvaluation());
  } else if (open->model_version != task_->completed_rounds() + 1) {
    return absl::DataLossError(absl::StrCat("open round produces version ", open->model_version,
                                            " but the checkpoint is at ",
                                            task_->completed_rounds()));
  }
  if (!evaluation) {
    // Re-plan: deterministic given the checkpoint (same recycled set, same
    // charge to the restored accountant as before the restart).
    TANDEM_ASSIGN_OR_RETURN(RoundPlan plan, task_->PlanRound());
    plan_.emplace(std::move(plan));
  }
  aggregation_round_ = open->aggregation_round;
  opened_ms_ = open->opened_unix_ms;
  deadline_ms_ = open->deadline_unix_ms;
  TANDEM_ASSIGN_OR_RETURN(std::vector<AssignmentRecord> assigned,
                          store_->LoadAssignments(aggregation_round_));
  for (AssignmentRecord& a : assigned) {
    // The same ticket as before the restart (deterministic); none for a
    // device revoked since (its check-ins and UploadDone are refused).
    proto::SignedUploadTicket ticket;
    if (absl::StatusOr<std::string> key = options_.devices->ActiveKey(a.client_id); key.ok()) {
      TANDEM_ASSIGN_OR_RETURN(ticket,
                              IssueTicket(aggregation_round_, deadline_ms_, a.client_id, *key));
    }
    assigned_[a.client_id] = {false, a.done, std::move(a.report_id), a.bytes_up, std::move(ticket)};
  }
  phase_ = Phase::kOpening;
  resumed_round_ = true;
  TANDEM_LOG(INFO) << "coordinator: resuming aggregation round " << aggregation_round_ << " ("
                   << assigned_.size() << " assigned) from the checkpoint at version "
                   << task_->completed_rounds();
  return absl::OkStatus();
}

absl::Status Coordinator::RecordRelease(uint64_t round, const DecodedAggregate& agg,
                                        proto::RoundSummary summary) {
  TANDEM_RETURN_IF_ERROR(task_->FinishRound(agg.mean));
  const double epsilon = plan_->epsilon_after;
  plan_.reset();
  TANDEM_RETURN_IF_ERROR(Evaluate(&summary));
  summary.set_model_version(task_->completed_rounds());
  summary.set_aggregation_round(round);
  summary.set_accepted_reports(agg.reports);
  summary.set_epsilon(epsilon);
  TANDEM_ASSIGN_OR_RETURN(proto::TaskCheckpoint cp, task_->Checkpoint());
  {
    absl::MutexLock lock(&mu_);
    summary.set_bytes_down(round_bytes_down_);
    summary.set_seconds(static_cast<double>(NowMs() - opened_ms_) / 1000.0);
    TANDEM_RETURN_IF_ERROR(Stored(store_->FinishRound(round, cp, summary)));
  }
  // Recorded: the file next, and only then the version is served and shown
  // (a caller that sees N completed rounds exports version N, not N - 1:
  // the file was once written after the status moved, and an export of the
  // latest version in between returned the previous one). Outside mu_, so a
  // large model's write does not hold up status and check-ins; until the
  // version is published below they see the previous one, as before the
  // record.
  WriteReleasedModelFile(/*only_if_missing=*/false);
  {
    absl::MutexLock lock(&mu_);
    TANDEM_LOG(INFO) << "coordinator: released version " << summary.model_version() << " from "
                     << agg.reports << " reports, accuracy " << summary.accuracy()
                     << " (evaluated by " << summary.evaluated_by() << "), epsilon " << epsilon;
    history_.push_back(summary);
    epsilon_ = task_->epsilon_spent();
    assigned_.clear();
    PublishModel();
    phase_ = Phase::kIdle;
  }
  return absl::OkStatus();
}

absl::Status Coordinator::RecoverFromStore(uint64_t round, const absl::Status& why) {
  record_backoff_ = std::clamp(record_backoff_ * 2, absl::Seconds(1), absl::Seconds(30));
  record_retry_after_ms_ = NowMs() + absl::ToInt64Milliseconds(record_backoff_);
  TANDEM_LOG(WARNING) << "coordinator: the aggregators released aggregation round " << round
                      << " but recording it failed (" << why << "); back to the stored state, "
                      << "finalizing it again in " << absl::FormatDuration(record_backoff_);
  if (absl::Status s = Restore(); !s.ok()) {
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kDone;
    done_reason_ = absl::StrCat("the stored state could not be read back after round ", round,
                                " could not be recorded: ", s.ToString());
    TANDEM_LOG(ERROR) << "coordinator: " << done_reason_;
    return s;
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Evaluate(proto::RoundSummary* summary) {
  if (model_ == nullptr) {
    // An opaque model: only its clients can evaluate it (federated
    // evaluation rounds, --eval_every).
    summary->set_evaluated_by("none");
    return absl::OkStatus();
  }
  TANDEM_RETURN_IF_ERROR(model_->SetParams(task_->params()));
  if (options_.evaluator != nullptr) {
    absl::StatusOr<ml::EvalStats> e =
        options_.evaluator->Evaluate(*model_, options_.model, task_->completed_rounds());
    if (e.ok()) {
      summary->set_accuracy(e->accuracy);
      summary->set_loss(e->loss);
      summary->set_evaluated_by(options_.evaluator->Status().address());
      return absl::OkStatus();
    }
    TANDEM_LOG(WARNING) << "coordinator: the worker did not evaluate version "
                        << task_->completed_rounds() << " (evaluating in process): " << e.status();
  }
  TANDEM_ASSIGN_OR_RETURN(ml::EvalStats e, engine_->Evaluate(*model_, eval_));
  summary->set_accuracy(e.accuracy);
  summary->set_loss(e.loss);
  summary->set_evaluated_by("coordinator");
  return absl::OkStatus();
}

void Coordinator::WriteReleasedModelFile(bool only_if_missing) {
  const uint64_t version = task_->completed_rounds();
  if (options_.models_dir.empty() || version == 0) return;
  if (only_if_missing && std::filesystem::exists(ReleasedModelPath(options_.models_dir, version))) {
    return;
  }
  const absl::Status s =
      WriteReleasedModel(options_.models_dir, layout_, task_->params(), options_.task_id, version);
  if (!s.ok()) {
    TANDEM_LOG(ERROR) << "coordinator: cannot write released model version " << version << ": "
                      << s;
  }
}

}  // namespace tandem::server
