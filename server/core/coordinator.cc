#include "server/core/coordinator.h"

#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "ml/fedluar/federated_sim.h"
#include "ml/model/model_zoo.h"
#include "ml/spec/model_from_spec.h"
#include "server/core/coordinator_plan.h"
#include "server/core/released_models.h"
#include "server/core/upload_baselines.h"

namespace tandem::server {
namespace {

constexpr char kSamplingKeyMeta[] = "sampling_key";
constexpr char kConfigMeta[] = "config";

// The parts of the configuration a stored task must agree with.
std::string Fingerprint(const CoordinatorOptions& o) {
  std::string hidden;
  for (int64_t h : o.model.hidden()) absl::StrAppend(&hidden, h, ",");
  for (const proto::TensorSpec& t : o.model.tensors()) {  // an opaque model's layout
    absl::StrAppend(&hidden, t.name(), "[", absl::StrJoin(t.shape(), "x"), "],");
  }
  if (ml::IsLayered(o.model)) {  // a native layer list over its input shape
    absl::StrAppend(&hidden, "in[", absl::StrJoin(o.model.input_shape(), "x"), "]");
    for (const proto::LayerSpec& l : o.model.layers()) {
      absl::StrAppend(&hidden, ",", l.kind(), ":", l.units(), ":", l.kernel(), ":", l.stride(), ":",
                      l.padding(), ":", l.vocab());
    }
  }
  const SecureSumConfig& s = o.task.secure_sum;
  return absl::StrCat("task=", o.task_id, " model=", o.model.input_dim(), "/", hidden, "/",
                      o.model.num_classes(), " seed=", o.init_seed, " B=", s.block_size,
                      " d=", s.log_blocks_per_group, " frac=", s.frac_bits, " C=", s.clip_l2_norm,
                      " z=", s.noise_multiplier, " q=", o.task.sample_rate,
                      " R=", o.task.num_recycled, " opt=", static_cast<int>(o.task.optimizer),
                      o.task.secure_sum.norm_proofs ? " proofs" : "");
}

}  // namespace

FederatedTaskOptions PrivateTaskDefaults() {
  FederatedTaskOptions t;
  t.secure_sum.noise_multiplier = 1.0;
  t.secure_sum.norm_proofs = true;
  t.secure_sum.encoding = EncodingChoice::kAuto;
  t.secure_sum.min_batch_size = 10;
  return t;
}

const char* Coordinator::PhaseName(Phase p) {
  switch (p) {
    case Phase::kIdle: return "idle";
    case Phase::kOpening: return "opening";
    case Phase::kCollecting: return "collecting";
    case Phase::kFinalizing: return "finalizing";
    case Phase::kDone: return "done";
  }
  return "unknown";
}

Coordinator::Coordinator(CoordinatorOptions options, crypto::Ed25519SigningKey ticket_key,
                         crypto::Ed25519VerifyingKey ticket_verifier, ml::Dataset eval,
                         AggregatorClient* leader, AggregatorClient* helper,
                         std::unique_ptr<CoordinatorStore> store, const Clock* clock)
    : options_(std::move(options)),
      eval_(std::move(eval)),
      leader_(leader),
      helper_(helper),
      store_(std::move(store)),
      clock_(clock),
      skew_(clock),
      ticket_key_(std::move(ticket_key)),
      ticket_verifier_(std::move(ticket_verifier)) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    CoordinatorOptions options, crypto::Ed25519SigningKey ticket_key, ml::Dataset eval_data,
    AggregatorClient* leader, AggregatorClient* helper, std::unique_ptr<CoordinatorStore> store,
    const Clock* clock, SecureRandom* random) {
  if (leader == nullptr || helper == nullptr || store == nullptr || clock == nullptr ||
      random == nullptr || options.devices == nullptr) {
    return absl::InvalidArgumentError(
        "coordinator: aggregators, device registry, store, clock and random required");
  }
  TANDEM_RETURN_IF_ERROR(ValidateId(options.task_id, "task_id"));
  if (options.rounds < 1 || options.min_reports < 1 || options.round_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rounds >= 1, min_reports >= 1 and round_timeout > 0 required");
  }
  if (options.enrollment_window < absl::ZeroDuration() ||
      options.enrollment_window >= options.round_timeout) {
    return absl::InvalidArgumentError("enrollment_window must be in [0, round_timeout)");
  }
  if (options.target_reports != 0 && options.target_reports < options.min_reports) {
    return absl::InvalidArgumentError("target_reports must be 0 or >= min_reports");
  }
  if (options.min_reports > options.task.secure_sum.max_reports) {
    return absl::InvalidArgumentError("min_reports exceeds max_reports");
  }
  if (options.task.secure_sum.min_batch_size < 1 ||
      options.min_reports < options.task.secure_sum.min_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_batch_size must be >= 1 and the quorum min_reports (", options.min_reports,
        ") >= min_batch_size (", options.task.secure_sum.min_batch_size,
        "): the aggregators release no smaller batch"));
  }
  if (!options.leader.address().empty() && options.leader.address() == options.helper.address()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader and helper are announced at the same address ", options.leader.address(),
        ": one server would receive both shares of every report"));
  }
  if (!options.leader.server_name().empty() &&
      options.leader.server_name() == options.helper.server_name()) {
    return absl::InvalidArgumentError(absl::StrCat("leader and helper have the same TLS name ",
                                                   options.leader.server_name()));
  }
  const bool opaque = options.model.tensors_size() > 0;
  if (opaque) {
    // The app's framework trains it; the coordinator keeps, aggregates and
    // releases its parameters and never evaluates it itself.
    if (options.initial_params.empty()) {
      return absl::InvalidArgumentError("an opaque model needs its initial parameters");
    }
    if (options.model.num_classes() == 1 || options.model.num_classes() < 0 ||
        (options.evaluation.every > 0 && options.model.num_classes() < 2)) {
      return absl::InvalidArgumentError(
          "an opaque model's num_classes must be 0 (unknown) or >= 2 (>= 2 for federated "
          "evaluation)");
    }
    if (options.evaluator != nullptr) {
      return absl::InvalidArgumentError("a worker cannot evaluate an opaque model");
    }
  } else if (ml::IsLayered(options.model) && options.evaluator != nullptr) {
    // The worker's model kinds are MLPs (worker_evaluator.h): a layer list
    // is evaluated here.
    options.evaluator = nullptr;
  } else {
    if (options.model.input_dim() < 1 || options.model.num_classes() < 2) {
      return absl::InvalidArgumentError("model needs input_dim >= 1 and num_classes >= 2");
    }
    TANDEM_RETURN_IF_ERROR(eval_data.Validate());
    if (eval_data.size() < 1 || eval_data.features.cols() != options.model.input_dim() ||
        eval_data.num_classes != options.model.num_classes()) {
      return absl::InvalidArgumentError("evaluation data does not match the model");
    }
  }
  TANDEM_RETURN_IF_ERROR(ValidateEvaluationOptions(
      options.evaluation, static_cast<uint32_t>(options.model.num_classes())));
  if (options.evaluation.every > 0 && options.task.secure_sum.noise_multiplier > 0 &&
      options.evaluation.noise_multiplier == 0) {
    return absl::InvalidArgumentError(
        "evaluation rounds need noise when training rounds have it (the metrics are a release "
        "too)");
  }
  options.task.secure_sum.task_id = options.task_id;
  TANDEM_ASSIGN_OR_RETURN(const std::optional<std::string> planned,
                          PlanPrivateRounds(opaque, *store, &options));
  TANDEM_ASSIGN_OR_RETURN(crypto::Ed25519VerifyingKey verifier,
                          ticket_key.VerifyingKey());
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(options), std::move(ticket_key),
                                                 std::move(verifier), std::move(eval_data), leader,
                                                 helper, std::move(store), clock));
  std::vector<float> initial;
  if (opaque) {
    TANDEM_ASSIGN_OR_RETURN(c->layout_, OpaqueLayout(c->options_.model, kMaxOpaqueParams));
    initial = c->options_.initial_params;
    const int64_t expected = c->layout_.back().offset + c->layout_.back().size;
    if (static_cast<int64_t>(initial.size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat("the initial parameters hold ", initial.size(),
                                                     " values, the model ", expected));
    }
  } else {
    // The MLP or the layer list, built as the C++ SDK builds it on device.
    TANDEM_ASSIGN_OR_RETURN(c->model_, ml::ModelFromSpec(c->options_.model));
    c->model_->InitFromSeed(c->options_.init_seed);
    c->layout_ = c->model_->param_infos();
    initial = c->model_->Flatten();
  }
  TANDEM_ASSIGN_OR_RETURN(c->engine_, ml::GradientEngine::Create(c->options_.eval_threads));
  TANDEM_ASSIGN_OR_RETURN(
      c->task_,
      FederatedTask::Create(c->options_.task, ml::TensorSlices(c->layout_), std::move(initial)));
  TANDEM_ASSIGN_OR_RETURN(c->initial_checkpoint_, c->task_->Checkpoint());
  // The sampling key: drawn once, kept across restarts.
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> key, c->store_->GetMeta(kSamplingKeyMeta));
  if (!key.has_value()) {
    std::string fresh(32, '\0');
    TANDEM_RETURN_IF_ERROR(
        random->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(fresh.data()), fresh.size())));
    TANDEM_RETURN_IF_ERROR(c->store_->PutMeta(kSamplingKeyMeta, fresh));
    key = fresh;
  }
  if (key->size() != 32) return absl::DataLossError("stored sampling key is not 32 bytes");
  std::memcpy(c->sampling_key_.data(), key->data(), 32);
  const std::string fingerprint = Fingerprint(c->options_);
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> stored, c->store_->GetMeta(kConfigMeta));
  if (stored.has_value() && *stored != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the state directory holds another task (", *stored, "); this one is ", fingerprint));
  }
  if (!stored.has_value()) TANDEM_RETURN_IF_ERROR(c->store_->PutMeta(kConfigMeta, fingerprint));
  if (planned.has_value()) TANDEM_RETURN_IF_ERROR(c->store_->PutMeta(kPlannedRoundsMeta, *planned));
  TANDEM_RETURN_IF_ERROR(c->Restore());
  return c;
}

bool Coordinator::EnrollmentOver(int64_t now_ms) const {
  return options_.enrollment_window > absl::ZeroDuration() &&
         now_ms >= opened_ms_ + absl::ToInt64Milliseconds(options_.enrollment_window);
}

int64_t Coordinator::NowMs() const { return absl::ToUnixMillis(clock_->Now()); }

absl::Status Coordinator::Tick() {
  Phase phase;
  {
    absl::MutexLock lock(&mu_);
    phase = phase_;
  }
  switch (phase) {
    case Phase::kDone:
    case Phase::kFinalizing:
      return absl::OkStatus();
    case Phase::kIdle:
      if (paused()) return absl::OkStatus();  // no new round while paused
      return StartRound();
    case Phase::kOpening:
      if (NowMs() < record_retry_after_ms_) return absl::OkStatus();  // RecoverFromStore
      return TryOpen();
    case Phase::kCollecting: {
      uint64_t done = 0;
      bool expired, all_in;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [id, a] : assigned_) done += a.done ? 1 : 0;
        const int64_t now = NowMs();
        expired = now >= deadline_ms_;
        all_in = EnrollmentOver(now) && done == assigned_.size();
      }
      const bool full = options_.target_reports > 0 && done >= options_.target_reports;
      if (!full && !all_in && !expired) return absl::OkStatus();
      if (done < options_.min_reports) {
        return Abandon(absl::StrCat("quorum missed: ", done, " of ", options_.min_reports,
                                    " uploads by the deadline"));
      }
      return Finalize();
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::StartRound() {
  if (EvaluationDue()) return StartEvaluation();
  if (task_->completed_rounds() >= options_.rounds) {
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kDone;
    done_reason_ = absl::StrCat("all ", options_.rounds, " rounds released");
    return absl::OkStatus();
  }
  absl::StatusOr<RoundPlan> plan = task_->PlanRound();
  if (absl::IsResourceExhausted(plan.status())) {
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kDone;
    done_reason_ = std::string(plan.status().message());
    TANDEM_LOG(INFO) << "coordinator: " << done_reason_;
    return absl::OkStatus();
  }
  TANDEM_RETURN_IF_ERROR(plan.status());
  absl::StatusOr<OpenRoundRecord> rec = BeginAggregationRound(task_->completed_rounds() + 1);
  if (!rec.ok()) {
    TANDEM_RETURN_IF_ERROR(task_->AbandonRound());
    return rec.status();
  }
  plan_.emplace(*std::move(plan));
  EnterOpening(*rec);
  return absl::OkStatus();
}

absl::StatusOr<OpenRoundRecord> Coordinator::BeginAggregationRound(uint64_t model_version) {
  TANDEM_ASSIGN_OR_RETURN(uint64_t last, store_->LastAggregationRound());
  OpenRoundRecord rec;
  rec.aggregation_round = last + 1;
  rec.model_version = model_version;
  rec.opened_unix_ms = NowMs();
  rec.deadline_unix_ms = rec.opened_unix_ms + absl::ToInt64Milliseconds(options_.round_timeout);
  TANDEM_RETURN_IF_ERROR(Stored(store_->BeginRound(rec)));
  return rec;
}

void Coordinator::EnterOpening(const OpenRoundRecord& rec) {
  absl::MutexLock lock(&mu_);
  aggregation_round_ = rec.aggregation_round;
  opened_ms_ = rec.opened_unix_ms;
  deadline_ms_ = rec.deadline_unix_ms;
  assigned_.clear();
  round_bytes_down_ = 0;
  phase_ = Phase::kOpening;
}

absl::Status Coordinator::TryOpen() {
  uint64_t round;
  int64_t deadline;
  {
    absl::MutexLock lock(&mu_);
    round = aggregation_round_;
    deadline = deadline_ms_;
  }
  const SecureSum& sum = eval_sum_.has_value() ? *eval_sum_ : *plan_->sum;
  absl::Status s = sum.Open(*leader_, *helper_, round, deadline, &skew_);
  if (absl::IsFailedPrecondition(s) && resumed_round_) {
    // A round resumed after a restart that an aggregator calls closed: it
    // may have released it before the crash, after its Finalize and before
    // this coordinator recorded the release. Finalize is idempotent there
    // (the released share again), so the release is recovered; a round it
    // closed without release fails Finalize and is abandoned.
    TANDEM_LOG(WARNING) << "coordinator: resumed aggregation round " << round
                        << " is closed at an aggregator (" << s.message() << "): finalizing it";
    resumed_round_ = false;
    return Finalize();
  }
  if (!s.ok()) {
    // The aggregators own the privacy policy: a round their policy or
    // budget refuses (or a caller identity they refuse) will never open, so
    // the task stops with their reason instead of retrying forever.
    if (absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s) ||
        absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s)) {
      absl::MutexLock lock(&mu_);
      phase_ = Phase::kDone;
      done_reason_ = absl::StrCat("the aggregators refused round ", round, ": ", s.ToString());
      TANDEM_LOG(WARNING) << "coordinator: " << done_reason_;
      return absl::OkStatus();
    }
    if (NowMs() >= deadline) return Abandon(absl::StrCat("aggregators did not open: ", s.message()));
    TANDEM_LOG(WARNING) << "coordinator: opening aggregation round " << round
                        << " failed (will retry): " << s;
    return absl::OkStatus();
  }
  resumed_round_ = false;
  proto::CheckInResponse t;
  t.set_outcome(proto::CheckInResponse::OUTCOME_TASK);
  t.set_task_id(options_.task_id);
  t.set_round_id(round);
  t.set_deadline_unix_ms(deadline);
  *t.mutable_round_parameters() = sum.RoundParameters(round, deadline);
  const proto::RoundParameters& rp = t.round_parameters();
  *t.mutable_group_parameters() = rp.group_parameters();
  t.set_num_groups(rp.num_groups());
  t.set_dimension(rp.dimension());
  *t.mutable_leader() = options_.leader;
  *t.mutable_helper() = options_.helper;
  proto::TrainingConfig* tc = t.mutable_training();
  *tc = options_.training;
  *tc->mutable_model() = options_.model;
  *tc->mutable_fixed_point() = rp.fixed_point();
  tc->clear_recycled_layers();
  if (eval_sum_.has_value()) {
    *t.mutable_evaluation() = ClientEvaluationConfig();
  } else {
    for (size_t i : plan_->recycled) tc->add_recycled_layers(static_cast<uint32_t>(i));
  }
  absl::MutexLock lock(&mu_);
  t.set_model_version(model_version_);
  assignment_ = std::move(t);
  phase_ = Phase::kCollecting;
  if (eval_sum_.has_value()) {
    TANDEM_LOG(INFO) << "coordinator: aggregation round " << round
                     << " collecting the federated evaluation of version " << model_version_
                     << " (D=" << rp.dimension() << ")";
  } else {
    TANDEM_LOG(INFO) << "coordinator: aggregation round " << round << " collecting (version "
                     << model_version_ + 1 << ", D=" << rp.dimension() << ", "
                     << plan_->recycled.size() << " tensors recycled)";
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Abandon(const std::string& why) {
  uint64_t round;
  {
    absl::MutexLock lock(&mu_);
    round = aggregation_round_;
  }
  TANDEM_LOG(WARNING) << "coordinator: abandoning aggregation round " << round << ": " << why;
  if (eval_sum_.has_value()) {
    // Not retried: the charge stays (conservative), the version is skipped.
    eval_sum_.reset();
    last_evaluated_version_ = task_->completed_rounds();
  } else {
    TANDEM_RETURN_IF_ERROR(task_->AbandonRound());
  }
  plan_.reset();
  TANDEM_ASSIGN_OR_RETURN(proto::TaskCheckpoint cp, task_->Checkpoint());
  TANDEM_RETURN_IF_ERROR(Stored(store_->AbandonRound(round, cp)));
  absl::MutexLock lock(&mu_);
  ++abandoned_;
  assigned_.clear();
  epsilon_ = task_->epsilon_spent();
  phase_ = Phase::kIdle;
  return absl::OkStatus();
}

absl::Status Coordinator::Finalize() {
  uint64_t round;
  int64_t deadline;
  proto::RoundSummary summary;
  {
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kFinalizing;
    deadline = deadline_ms_;  // check-ins wait; uploads are refused by now
    round = aggregation_round_;
    summary.set_assigned(assigned_.size());
    for (const auto& [id, a] : assigned_) {
      if (!a.done) continue;
      summary.set_uploads_done(summary.uploads_done() + 1);
      summary.set_bytes_up(summary.bytes_up() + a.bytes_up);
    }
  }
  const SecureSum& sum = eval_sum_.has_value() ? *eval_sum_ : *plan_->sum;
  const uint64_t dim = sum.config().model_dimension;
  summary.set_dimension(dim);
  summary.set_clear_bytes_up(summary.uploads_done() * ClearFedAvgBytes(dim));
  summary.set_dense_bytes_up(summary.uploads_done() *
                             DenseSharingBytes(dim, sum.config().value_bits));
  summary.set_encoding(std::string(ReportEncodingName(sum.encoding())));
  absl::StatusOr<DecodedAggregate> agg = sum.Finalize(*leader_, *helper_, round);
  if (!agg.ok()) {
    const bool retry = absl::IsUnavailable(agg.status()) || absl::IsDeadlineExceeded(agg.status());
    if (retry && NowMs() < deadline + absl::ToInt64Milliseconds(options_.round_timeout)) {
      TANDEM_LOG(WARNING) << "coordinator: finalize of round " << round
                          << " failed (will retry): " << agg.status();
      absl::MutexLock lock(&mu_);
      phase_ = Phase::kCollecting;
      return absl::OkStatus();
    }
    return Abandon(absl::StrCat("finalize failed: ", agg.status().message()));
  }
  if (eval_sum_.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(proto::FederatedEvaluation e,
                            DecodeEvaluation(*agg, sum.RoundParameters(round, deadline),
                                             ClientEvaluationConfig(), task_->completed_rounds()));
    *summary.mutable_evaluation() = std::move(e);
  }
  const absl::Status recorded = eval_sum_.has_value()
                                    ? FinalizeEvaluation(round, std::move(summary))
                                    : RecordRelease(round, *agg, std::move(summary));
  if (!recorded.ok()) return RecoverFromStore(round, recorded);
  record_backoff_ = absl::ZeroDuration();
  return absl::OkStatus();
}

absl::Status Coordinator::Stored(absl::Status s) {
  store_stall_.ObserveAndLog(s, clock_->Now(), "coordinator: ");
  return s;
}

bool Coordinator::done() {
  absl::MutexLock lock(&mu_);
  return phase_ == Phase::kDone;
}

}  // namespace tandem::server
