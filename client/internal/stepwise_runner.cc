#include "client/internal/stepwise_runner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/eval_metrics.h"
#include "client/internal/report_builder.h"
#include "ml/fedluar/federated_sim.h"
#include "ml/spec/model_from_spec.h"

namespace tandem::client {
namespace {

// Holds `busy` for one call; a second concurrent call is refused.
class BusyGuard {
 public:
  explicit BusyGuard(std::atomic<bool>* busy) : busy_(busy), owned_(!busy->exchange(true)) {}
  ~BusyGuard() {
    if (owned_) *busy_ = false;
  }
  absl::Status status() const {
    return owned_ ? absl::OkStatus()
                  : absl::FailedPreconditionError(
                        "another call is running on this participant (one at a time)");
  }

 private:
  std::atomic<bool>* busy_;
  bool owned_;
};

bool SameRound(const PendingReport& p, uint64_t round_id, const std::string& task_id) {
  return p.round_id == round_id && p.to_leader.task_id() == task_id;
}
bool SameRound(const PendingReport& p, const proto::CheckInResponse& task) {
  return SameRound(p, task.round_id(), task.task_id());
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepwiseRunner>> StepwiseRunner::Create(
    const ParticipantOptions& options, const StepwiseEnvironment& env,
    std::unique_ptr<RoundTransport> transport) {
  if (env.clock == nullptr || env.random == nullptr || transport == nullptr) {
    return absl::InvalidArgumentError("participant needs a clock, random and transport");
  }
  // client_id is the app's own label (logs only); the servers know the
  // device by the id of its key.
  if (!options.client_id.empty())
    TANDEM_RETURN_IF_ERROR(ValidateId(options.client_id, "client_id"));
  if (options.upload_attempts < 1 || options.rpc_timeout_ms < 1) {
    return absl::InvalidArgumentError("upload_attempts and rpc_timeout_ms must be >= 1");
  }
  TANDEM_RETURN_IF_ERROR(ValidateTrustOptions(options));
  if (options.leader_address.empty() && options.leader_name.empty()) {
    TANDEM_LOG(WARNING) << "client " << options.client_id
                        << ": no aggregator pins configured (leader/helper address or TLS name); "
                           "the coordinator's upload endpoints will be trusted";
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DeviceIdentity> device,
      DeviceIdentity::LoadOrCreate(env.storage, env.random, options.enrollment_token));
  return std::unique_ptr<StepwiseRunner>(
      new StepwiseRunner(options, env, std::move(transport), std::move(device)));
}

void StepwiseRunner::Cancel() {
  cancelled_ = true;
  transport_->Cancel();
}

absl::Status StepwiseRunner::CheckCancelled() const {
  return cancelled_ ? absl::CancelledError("participant cancelled") : absl::OkStatus();
}

absl::StatusOr<CheckInResult> StepwiseRunner::CheckIn() {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  TANDEM_ASSIGN_OR_RETURN(proto::CheckInRequest req,
                          device_->MakeCheckIn(options_.task_id, *env_.clock, *env_.random));
  TANDEM_ASSIGN_OR_RETURN(proto::CheckInResponse resp, transport_->CheckIn(req));
  device_->MarkEnrolled();
  CheckInResult result;
  switch (resp.outcome()) {
    case proto::CheckInResponse::OUTCOME_DONE:
      result.outcome = CheckInOutcome::kTaskDone;
      current_.reset();
      return result;
    case proto::CheckInResponse::OUTCOME_RETRY_LATER:
      result.outcome = CheckInOutcome::kNotSelected;
      result.retry_after_ms = std::clamp<int64_t>(resp.retry_after_ms(), 10, kMaxRetryAfterMs);
      return result;
    case proto::CheckInResponse::OUTCOME_TASK:
      return Assign(resp);
    default:
      return absl::InternalError("coordinator sent an unknown check-in outcome");
  }
}

absl::StatusOr<CheckInResult> StepwiseRunner::Assign(const proto::CheckInResponse& task) {
  current_.reset();
  const proto::RoundParameters& rp = task.round_parameters();
  if (rp.task_id() != task.task_id() || rp.round_id() != task.round_id()) {
    return absl::InvalidArgumentError("assignment and its round parameters disagree");
  }
  // Who gets the shares and under which ticket: checked before anything else.
  TANDEM_ASSIGN_OR_RETURN(std::optional<proto::UploadTicket> ticket, CheckAssignmentTicket(task));
  TANDEM_ASSIGN_OR_RETURN(UploadEndpoints endpoints,
                          ResolveUploadEndpoints(options_, task.leader(), task.helper()));
  Current c;
  c.task = task;
  c.endpoints = std::move(endpoints);
  CheckInResult result;
  result.round_id = task.round_id();
  // A report of this very round was maybe not delivered: resend it as is.
  TANDEM_ASSIGN_OR_RETURN(std::optional<PendingReport> pending, PendingFor(task));
  if (pending.has_value()) {
    TANDEM_RETURN_IF_ERROR(Deliver(c, *pending, 0, &result.bytes_up));
    result.outcome = CheckInOutcome::kResent;
    return result;
  }
  // Every size the coordinator sent, before allocating anything.
  TANDEM_RETURN_IF_ERROR(CheckRoundBounds(task, options_));
  TANDEM_ASSIGN_OR_RETURN(const uint64_t params, CheckTrainingBounds(task.training(), options_));
  const proto::TrainingConfig& tc = task.training();
  // The model's tensors: an MLP's (rebuilt) or an opaque model's (as named).
  std::vector<ml::ParamInfo> infos;
  if (tc.model().tensors_size() > 0) {
    for (const proto::TensorSpec& t : tc.model().tensors()) {  // bounded by CheckTrainingBounds
      ml::AppendNamedTensor(infos, t.name(), {t.shape().begin(), t.shape().end()});
    }
  } else {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model, ml::ModelFromSpec(tc.model()));
    infos = model->param_infos();
  }
  TANDEM_RETURN_IF_ERROR(CheckRecycledLayers(tc, infos.size()));
  c.slices = ml::TensorSlices(infos);
  c.recycled.assign(tc.recycled_layers().begin(), tc.recycled_layers().end());
  // The builder checks fixed point and norm bound now, not after training.
  ReportParameters report_params = ReportParametersFromRound(rp);
  report_params.max_dimension = options_.max_dimension;
  TANDEM_RETURN_IF_ERROR(ReportBuilder::Create(report_params).status());

  Assignment& a = c.public_view;
  a.task_id = task.task_id();
  a.round_id = task.round_id();
  a.model_version = task.model_version();
  a.deadline_unix_ms = task.deadline_unix_ms();
  uint64_t packed = params;
  for (size_t i = 0; i < infos.size(); ++i) {
    const ml::ParamInfo& p = infos[i];
    const bool recycled = std::find(c.recycled.begin(), c.recycled.end(), i) != c.recycled.end();
    if (recycled) packed -= static_cast<uint64_t>(p.size);
    a.tensors.push_back({p.name, p.shape, p.offset, p.size, recycled});
  }
  if (tc.model().tensors_size() > 0) {
    // An opaque model's data schema, bounded as the coordinator bounds it.
    const auto& shape = tc.model().input_shape();
    TANDEM_RETURN_IF_ERROR(ml::CheckOpaqueInputShape(shape));
    a.input_shape.assign(shape.begin(), shape.end());
  }
  if (task.has_evaluation()) {
    const proto::EvaluationConfig& e = task.evaluation();
    TANDEM_RETURN_IF_ERROR(CheckEvaluationConfig(e));
    if (static_cast<int64_t>(e.num_classes()) != tc.model().num_classes() ||
        rp.dimension() < 3 + 2 * uint64_t{e.num_classes()}) {
      return absl::InvalidArgumentError(
          "the evaluation's classes or dimension do not fit the task's model");
    }
    a.evaluation = EvaluationSettings{e.max_examples(), e.loss_clip(), e.num_classes()};
  } else if (packed > rp.dimension()) {
    return absl::InvalidArgumentError(absl::StrCat("the round's dimension ", rp.dimension(),
                                                   " is below the packed update's ", packed));
  }
  a.num_params = params;
  a.training = {tc.local_epochs(),  tc.local_steps(), tc.batch_size(),
                tc.learning_rate(), tc.momentum(),    tc.coido_fraction()};
  a.clip_l2_norm = rp.fixed_point().clip_l2_norm();
  a.frac_bits = static_cast<int>(rp.fixed_point().fractional_bits());
  a.dimension = rp.dimension();
  a.norm_proofs = rp.has_norm_bound();
  a.ticketed = ticket.has_value();
  a.round_parameters = rp.SerializeAsString();
  result.outcome = CheckInOutcome::kAssigned;
  result.assignment = a;
  current_ = std::move(c);
  return result;
}

absl::StatusOr<std::optional<PendingReport>> StepwiseRunner::PendingFor(
    const proto::CheckInResponse& task) {
  if (pending_.has_value()) {
    if (SameRound(*pending_, task)) return pending_;
    pending_.reset();  // an older round's: never deliverable again
  }
  if (env_.storage == nullptr) return std::optional<PendingReport>();
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> blob, env_.storage->Get(kPendingReportKey));
  if (!blob.has_value()) return std::optional<PendingReport>();
  std::optional<PendingReport> stored = DecodePendingReport(*blob);
  if (stored.has_value() && SameRound(*stored, task)) return stored;
  // An older round's (or an unreadable) report.
  TANDEM_RETURN_IF_ERROR(env_.storage->Delete(kPendingReportKey));
  return std::optional<PendingReport>();
}

absl::Status StepwiseRunner::Deliver(const Current& current, const PendingReport& report,
                                     uint64_t examples, uint64_t* bytes_up) {
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  TANDEM_RETURN_IF_ERROR(DeliverReport(*transport_, env_.storage, device_->id(), current.task,
                                       current.endpoints, report, examples, bytes_up));
  pending_.reset();
  return absl::OkStatus();
}

absl::StatusOr<ModelDownload> StepwiseRunner::DownloadModel() {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  if (!current_.has_value()) {
    return absl::FailedPreconditionError("no current assignment: CheckIn first");
  }
  proto::DownloadModelRequest req;
  req.set_task_id(current_->task.task_id());
  req.set_model_version(current_->task.model_version());
  TANDEM_ASSIGN_OR_RETURN(std::string blob, transport_->DownloadModel(req));
  ModelDownload out;
  out.bytes_down = blob.size();
  TANDEM_ASSIGN_OR_RETURN(
      out.values, ParseModelBlob(blob, current_->public_view.num_params, options_.max_model_bytes));
  return out;
}

absl::StatusOr<UploadResult> StepwiseRunner::Upload(absl::Span<const float> update,
                                                    uint64_t num_examples) {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  if (!current_.has_value()) {
    return absl::FailedPreconditionError(
        "no current assignment: CheckIn first (an assignment ends with its delivered report)");
  }
  const Current& c = *current_;
  if (c.public_view.evaluation.has_value()) {
    return absl::FailedPreconditionError(
        "the current assignment is a federated evaluation: UploadEvaluation");
  }
  // The input first: nothing is encoded, stored or sent for a bad update.
  if (update.size() != c.public_view.num_params) {
    return absl::InvalidArgumentError(absl::StrCat("the update has ", update.size(),
                                                   " values, the task's model has ",
                                                   c.public_view.num_params));
  }
  for (size_t i = 0; i < update.size(); ++i) {
    if (!std::isfinite(update[i])) {
      return absl::InvalidArgumentError(absl::StrCat("update value ", i, " is NaN or infinity"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> packed, ml::PackTensors(c.slices, c.recycled, update));
  return Send(c, packed, num_examples, options_.error_feedback);
}

absl::StatusOr<UploadResult> StepwiseRunner::UploadEvaluation(const EvaluationCounts& counts) {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  if (!current_.has_value() || !current_->task.has_evaluation()) {
    return absl::FailedPreconditionError(
        "no current federated evaluation assignment (a training one takes Upload)");
  }
  // Checked and encoded before anything is stored or sent.
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> metrics,
                          EncodeEvaluationMetrics(counts, current_->task.evaluation()));
  return Send(*current_, metrics, static_cast<uint64_t>(counts.examples),
              /*error_feedback=*/false);
}

absl::StatusOr<UploadResult> StepwiseRunner::Send(const Current& c, absl::Span<const float> packed,
                                                  uint64_t num_examples, bool error_feedback) {
  UploadResult result;
  result.round_id = c.task.round_id();
  TANDEM_ASSIGN_OR_RETURN(std::optional<PendingReport> pending, PendingFor(c.task));
  if (pending.has_value()) {
    result.resent = true;
  } else {
    ReportParameters report_params = ReportParametersFromRound(c.task.round_parameters());
    report_params.max_dimension = options_.max_dimension;
    TANDEM_ASSIGN_OR_RETURN(ReportBuilder builder, ReportBuilder::Create(report_params));
    // The report id is the ticket id (norm proofs bind it); random without one.
    std::string id;
    if (c.task.has_ticket()) {
      TANDEM_ASSIGN_OR_RETURN(
          proto::UploadTicket t,
          ParseUploadTicketFor(c.task.ticket(), c.task.task_id(), c.task.round_id()));
      id = t.ticket_id();
    }
    TANDEM_ASSIGN_OR_RETURN(
        BuiltReport report,
        BuildWithErrorFeedback(builder, c.task.task_id(), packed, env_.random, id,
                               error_feedback ? &feedback_ : nullptr, env_.storage));
    result.clip_factor = report.clip_factor;
    const proto::RoundParameters& rp = c.task.round_parameters();
    UploadRequests requests =
        c.task.has_ticket()
            ? MakeUploadRequests(std::move(report), rp.task_id(), rp.round_id(), c.task.ticket())
            : MakeUploadRequests(std::move(report), rp.task_id(), rp.round_id());
    TANDEM_RETURN_IF_ERROR(device_->SignUploads(&requests));
    PendingReport out;
    out.round_id = c.task.round_id();
    out.to_leader = std::move(requests.to_leader);
    out.to_helper = std::move(requests.to_helper);
    if (env_.storage != nullptr) {
      TANDEM_RETURN_IF_ERROR(env_.storage->Put(
          kPendingReportKey, EncodePendingReport(out.round_id, out.to_leader, out.to_helper)));
    }
    pending_ = std::move(out);
    pending = pending_;
  }
  result.report_id = pending->to_leader.report_id();
  TANDEM_RETURN_IF_ERROR(Deliver(c, *pending, num_examples, &result.bytes_up));
  current_.reset();
  return result;
}

absl::StatusOr<std::optional<PendingReportInfo>> StepwiseRunner::Pending() {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  std::optional<PendingReport> p = pending_;
  bool stored = false;
  if (env_.storage != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> blob, env_.storage->Get(kPendingReportKey));
    if (blob.has_value()) {
      std::optional<PendingReport> s = DecodePendingReport(*blob);
      if (s.has_value() && (!p.has_value() || SameRound(*s, p->round_id, p->to_leader.task_id()))) {
        p = std::move(s);
        stored = true;
      }
    }
  }
  if (!p.has_value()) return std::optional<PendingReportInfo>();
  return std::optional<PendingReportInfo>(
      PendingReportInfo{p->to_leader.task_id(), p->round_id, p->to_leader.report_id(), stored});
}

absl::StatusOr<std::optional<Assignment>> StepwiseRunner::CurrentAssignment() {
  BusyGuard guard(&busy_);
  TANDEM_RETURN_IF_ERROR(guard.status());
  if (!current_.has_value()) return std::optional<Assignment>();
  return std::optional<Assignment>(current_->public_view);
}

}  // namespace tandem::client
