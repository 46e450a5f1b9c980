#include "client/internal/round_runner.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/assignment_checks.h"
#include "client/internal/eval_metrics.h"
#include "client/internal/report_builder.h"
#include "client/internal/report_delivery.h"
#include "ml/coido/coido.h"
#include "ml/fedluar/federated_sim.h"
#include "ml/fedluar/fedluar.h"
#include "ml/optim/optimizer.h"
#include "ml/spec/model_from_spec.h"
#include "ml/train/trainer.h"

namespace tandem::client {
namespace {

// Local training runs in slices of this many steps, so Cancel() is noticed.
constexpr int64_t kStepsPerSlice = 8;

}  // namespace

absl::Status CheckExampleShape(const LocalData& d, const proto::ModelSpec& model) {
  if (d.shape.empty() || model.input_shape_size() == 0) return absl::OkStatus();
  const std::vector<int64_t> want(model.input_shape().begin(), model.input_shape().end());
  if (d.shape == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("local data's examples are [", absl::StrJoin(d.shape, ", "),
                   "], the task's model takes [", absl::StrJoin(want, ", "), "]"));
}

absl::StatusOr<ml::Dataset> DatasetFromLocalData(const LocalData& d) {
  if (d.rows < 1 || d.cols < 1 || d.features.size() != static_cast<size_t>(d.rows * d.cols) ||
      d.labels.size() != static_cast<size_t>(d.rows) || d.num_classes < 2) {
    return absl::InvalidArgumentError(
        "local data needs rows >= 1, cols >= 1, rows*cols features, one label per row and "
        "num_classes >= 2");
  }
  ml::Dataset out;
  out.num_classes = d.num_classes;
  out.labels = d.labels;
  out.shape = {1, 1, d.cols};  // flat features
  if (!d.shape.empty()) {
    int64_t product = 1;
    for (int64_t x : d.shape) product = x >= 1 && x <= d.cols ? product * x : -1;
    if ((d.shape.size() != 1 && d.shape.size() != 3) || product != d.cols) {
      return absl::InvalidArgumentError(
          "local data's shape must be {channels, height, width} or {cols}, its product cols");
    }
    if (d.shape.size() == 3) out.shape = {d.shape[0], d.shape[1], d.shape[2]};
  }
  out.features = Eigen::Map<const ml::Matrix>(d.features.data(), d.rows, d.cols);
  if (!out.features.allFinite())
    return absl::InvalidArgumentError("local data has non-finite features");
  TANDEM_RETURN_IF_ERROR(out.Validate());
  return out;
}

absl::StatusOr<std::unique_ptr<RoundRunner>> RoundRunner::Create(
    const ParticipantOptions& options, const Environment& env,
    std::unique_ptr<RoundTransport> transport) {
  if (env.data == nullptr || env.clock == nullptr || env.random == nullptr ||
      transport == nullptr) {
    return absl::InvalidArgumentError(
        "participant needs a data source, clock, random and transport");
  }
  // client_id is the app's own label (logs only); the servers know the
  // device by the id of its key.
  if (!options.client_id.empty())
    TANDEM_RETURN_IF_ERROR(ValidateId(options.client_id, "client_id"));
  if (options.threads < 1 || options.upload_attempts < 1 || options.rpc_timeout_ms < 1) {
    return absl::InvalidArgumentError("threads, upload_attempts and rpc_timeout_ms must be >= 1");
  }
  TANDEM_RETURN_IF_ERROR(ValidateTrustOptions(options));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DeviceIdentity> device,
      DeviceIdentity::LoadOrCreate(env.storage, env.random, options.enrollment_token));
  return std::unique_ptr<RoundRunner>(
      new RoundRunner(options, env, std::move(transport), std::move(device)));
}

void RoundRunner::Cancel() {
  cancelled_ = true;
  transport_->Cancel();
}

absl::Status RoundRunner::CheckCancelled() const {
  return cancelled_ ? absl::CancelledError("participant cancelled") : absl::OkStatus();
}

absl::StatusOr<RoundResult> RoundRunner::ParticipateOnce() {
  if (running_.exchange(true)) {
    return absl::FailedPreconditionError("a round is already running on this participant");
  }
  struct Reset {
    std::atomic<bool>* flag;
    ~Reset() { *flag = false; }
  } reset{&running_};
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  TANDEM_ASSIGN_OR_RETURN(proto::CheckInRequest req,
                          device_->MakeCheckIn(options_.task_id, *env_.clock, *env_.random));
  TANDEM_ASSIGN_OR_RETURN(proto::CheckInResponse resp, transport_->CheckIn(req));
  device_->MarkEnrolled();
  RoundResult result;
  switch (resp.outcome()) {
    case proto::CheckInResponse::OUTCOME_DONE:
      result.outcome = RoundOutcome::kTaskDone;
      return result;
    case proto::CheckInResponse::OUTCOME_RETRY_LATER:
      result.outcome = RoundOutcome::kNotSelected;
      result.retry_after_ms = std::clamp<int64_t>(resp.retry_after_ms(), 10, kMaxRetryAfterMs);
      return result;
    case proto::CheckInResponse::OUTCOME_TASK:
      return Contribute(resp);
    default:
      return absl::InternalError("coordinator sent an unknown check-in outcome");
  }
}

absl::StatusOr<RoundResult> RoundRunner::Contribute(const proto::CheckInResponse& task) {
  RoundResult result;
  result.outcome = RoundOutcome::kContributed;
  result.round_id = task.round_id();
  const proto::RoundParameters& rp = task.round_parameters();
  if (rp.task_id() != task.task_id() || rp.round_id() != task.round_id()) {
    return absl::InvalidArgumentError("assignment and its round parameters disagree");
  }
  // Who gets the shares and under which ticket: checked before anything else.
  TANDEM_ASSIGN_OR_RETURN(std::optional<proto::UploadTicket> ticket, CheckAssignmentTicket(task));
  TANDEM_ASSIGN_OR_RETURN(UploadEndpoints endpoints,
                          ResolveUploadEndpoints(options_, task.leader(), task.helper()));
  if (!endpoints.pinned && !warned_unpinned_.exchange(true)) {
    TANDEM_LOG(WARNING) << "client " << device_->id()
                        << ": no aggregator pins configured (leader/helper address or TLS "
                           "name); trusting the coordinator's upload endpoints "
                        << task.leader().address() << " and " << task.helper().address();
  }
  // A report stored for this very round was maybe not delivered: resend it
  // as is (same report id and ticket), never a second report.
  if (env_.storage != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> blob, env_.storage->Get(kPendingReportKey));
    if (blob.has_value()) {
      const std::optional<PendingReport> pending = DecodePendingReport(*blob);
      if (pending.has_value() && pending->round_id == task.round_id() &&
          pending->to_leader.task_id() == task.task_id()) {
        result.resent = true;
        TANDEM_RETURN_IF_ERROR(Deliver(task, endpoints, *pending, &result));
        return result;
      }
      // An older round's (or an unreadable) report.
      TANDEM_RETURN_IF_ERROR(env_.storage->Delete(kPendingReportKey));
    }
  }
  // Every size the coordinator sent, before allocating or training.
  TANDEM_RETURN_IF_ERROR(CheckRoundBounds(task, options_));
  TANDEM_ASSIGN_OR_RETURN(const uint64_t params, CheckTrainingBounds(task.training(), options_));
  ReportParameters report_params = ReportParametersFromRound(rp);
  report_params.max_dimension = options_.max_dimension;
  TANDEM_ASSIGN_OR_RETURN(ReportBuilder builder, ReportBuilder::Create(report_params));
  const bool evaluation = task.has_evaluation();
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> packed, evaluation
                                                         ? EvaluateModel(task, params, &result)
                                                         : TrainUpdate(task, params, &result));
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  // The report id is the ticket id (norm proofs bind it); random without one.
  const absl::string_view id =
      ticket.has_value() ? absl::string_view(ticket->ticket_id()) : absl::string_view();
  // Metrics carry no error feedback (a training residual is not theirs).
  TANDEM_ASSIGN_OR_RETURN(
      BuiltReport report,
      BuildWithErrorFeedback(builder, task.task_id(), packed, env_.random, id,
                             options_.error_feedback && !evaluation ? &feedback_ : nullptr,
                             env_.storage));
  result.clip_factor = report.clip_factor;
  PendingReport out;
  out.round_id = task.round_id();
  auto requests =
      ticket.has_value()
          ? MakeUploadRequests(std::move(report), rp.task_id(), rp.round_id(), task.ticket())
          : MakeUploadRequests(std::move(report), rp.task_id(), rp.round_id());
  // Signed with the device key the ticket names, before it is stored: a
  // resent report carries the same signatures.
  TANDEM_RETURN_IF_ERROR(device_->SignUploads(&requests));
  out.to_leader = std::move(requests.to_leader);
  out.to_helper = std::move(requests.to_helper);
  if (env_.storage != nullptr) {
    TANDEM_RETURN_IF_ERROR(env_.storage->Put(
        kPendingReportKey, EncodePendingReport(out.round_id, out.to_leader, out.to_helper)));
  }
  TANDEM_RETURN_IF_ERROR(Deliver(task, endpoints, out, &result));
  return result;
}

absl::StatusOr<std::unique_ptr<ml::Model>> RoundRunner::DownloadAssignedModel(
    const proto::CheckInResponse& task, uint64_t params, RoundResult* result,
    std::vector<float>* global) {
  const proto::TrainingConfig& tc = task.training();
  if (tc.model().tensors_size() > 0) {
    return absl::UnimplementedError(
        "the task's model is opaque (named tensors the app's framework trains): use the "
        "StepwiseParticipant or the Python Participant");
  }
  // The MLP or the task's layer list (a CNN ...), as the coordinator built it.
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model, ml::ModelFromSpec(tc.model()));
  TANDEM_RETURN_IF_ERROR(CheckRecycledLayers(tc, ml::TensorSlices(*model).size()));
  proto::DownloadModelRequest dreq;
  dreq.set_task_id(task.task_id());
  dreq.set_model_version(task.model_version());
  TANDEM_ASSIGN_OR_RETURN(std::string blob, transport_->DownloadModel(dreq));
  result->bytes_down = blob.size();
  TANDEM_ASSIGN_OR_RETURN(*global, ParseModelBlob(blob, params, options_.max_model_bytes));
  blob.clear();
  blob.shrink_to_fit();
  TANDEM_RETURN_IF_ERROR(model->SetParams(*global));
  return model;
}

absl::StatusOr<std::vector<float>> RoundRunner::EvaluateModel(const proto::CheckInResponse& task,
                                                              uint64_t params,
                                                              RoundResult* result) {
  const proto::EvaluationConfig& config = task.evaluation();
  TANDEM_RETURN_IF_ERROR(CheckEvaluationConfig(config));
  if (static_cast<int64_t>(config.num_classes()) != task.training().model().num_classes()) {
    return absl::InvalidArgumentError("the evaluation's classes are not the model's");
  }
  // The held-out examples first: without them nothing is downloaded.
  TANDEM_ASSIGN_OR_RETURN(LocalData held_out, env_.data->LoadHeldOut());
  TANDEM_ASSIGN_OR_RETURN(ml::Dataset data, DatasetFromLocalData(held_out));
  TANDEM_RETURN_IF_ERROR(CheckExampleShape(held_out, task.training().model()));
  std::vector<float> global;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model,
                          DownloadAssignedModel(task, params, result, &global));
  TANDEM_ASSIGN_OR_RETURN(const EvalCounts counts, CountEvaluation(*model, data, config));
  result->examples = static_cast<uint64_t>(counts.examples);
  result->evaluated = true;
  return EncodeEvaluationMetrics(counts, config);
}

absl::StatusOr<std::vector<float>> RoundRunner::TrainUpdate(const proto::CheckInResponse& task,
                                                            uint64_t params, RoundResult* result) {
  const proto::TrainingConfig& tc = task.training();
  std::vector<float> global;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model,
                          DownloadAssignedModel(task, params, result, &global));
  TANDEM_ASSIGN_OR_RETURN(LocalData local, env_.data->Load());
  TANDEM_ASSIGN_OR_RETURN(ml::Dataset data, DatasetFromLocalData(local));
  TANDEM_RETURN_IF_ERROR(CheckExampleShape(local, tc.model()));
  if (data.features.cols() != tc.model().input_dim() ||
      data.num_classes != tc.model().num_classes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local data (", data.features.cols(), " features, ", data.num_classes,
                     " classes) does not fit the task's model (", tc.model().input_dim(), ", ",
                     tc.model().num_classes(), ")"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::GradientEngine> engine,
                          ml::GradientEngine::Create(options_.threads));
  uint64_t seed = options_.seed;
  if (seed == 0) {
    TANDEM_RETURN_IF_ERROR(
        env_.random->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(&seed), sizeof(seed))));
  }
  std::mt19937_64 gen(seed ^ (task.round_id() * 0x9E3779B97F4A7C15ull));
  // CoIDO: keep the fraction the round asks for, scored with the global
  // model's embeddings and losses (ml/coido).
  if (tc.coido_fraction() > 0 && tc.coido_fraction() < 1 && data.size() >= 10) {
    TANDEM_ASSIGN_OR_RETURN(ml::EmbeddingsAndLosses el, engine->EmbedAndLoss(*model, data));
    ml::CoidoOptions co;
    co.select_fraction = tc.coido_fraction();
    co.num_clusters = static_cast<int>(std::min<int64_t>(10, data.size() / 2));
    co.seed = gen();
    TANDEM_ASSIGN_OR_RETURN(
        ml::CoidoResult pick,
        ml::CoidoSelect(el.embeddings, el.losses, data.labels, data.num_classes, co));
    TANDEM_ASSIGN_OR_RETURN(data, data.Subset(pick.selected));
  }
  result->examples = static_cast<uint64_t>(data.size());
  ml::SgdOptions so;
  so.learning_rate = tc.learning_rate() > 0 ? tc.learning_rate() : 0.05;
  so.momentum = tc.momentum();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Optimizer> opt, ml::CreateSgd(so));
  const int64_t batch = tc.batch_size() > 0 ? tc.batch_size() : 32;
  int64_t steps = tc.local_steps();
  if (steps == 0) {
    steps = std::max<int64_t>(1, tc.local_epochs()) * ((data.size() + batch - 1) / batch);
  }
  for (int64_t done = 0; done < steps; done += kStepsPerSlice) {
    TANDEM_RETURN_IF_ERROR(CheckCancelled());
    TANDEM_RETURN_IF_ERROR(ml::TrainSteps(*model, *opt, *engine, data,
                                          std::min(kStepsPerSlice, steps - done), batch, gen));
  }
  std::vector<float> update = model->Flatten();
  for (size_t i = 0; i < update.size(); ++i) update[i] -= global[i];
  // FedLUAR: the recycled tensors are not uploaded this round.
  const std::vector<size_t> recycled(tc.recycled_layers().begin(), tc.recycled_layers().end());
  return ml::PackTensors(ml::TensorSlices(*model), recycled, update);
}

absl::Status RoundRunner::Deliver(const proto::CheckInResponse& task,
                                  const UploadEndpoints& endpoints, const PendingReport& report,
                                  RoundResult* result) {
  TANDEM_RETURN_IF_ERROR(CheckCancelled());
  return DeliverReport(*transport_, env_.storage, device_->id(), task, endpoints, report,
                       result->examples, &result->bytes_up);
}

}  // namespace tandem::client
