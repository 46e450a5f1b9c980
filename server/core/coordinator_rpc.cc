// Coordinator: the request handlers (CheckIn, model download, UploadDone),
// the operator's controls (pause, cancel) and the status/metrics views. See
// coordinator.h.
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "server/core/coordinator.h"

namespace tandem::server {

absl::StatusOr<proto::CheckInResponse> Coordinator::CheckIn(const proto::CheckInRequest& request,
                                                            absl::string_view source) {
  // Who is asking, before anything else: proof of possession of an enrolled
  // device key (UNAUTHENTICATED / PERMISSION_DENIED, no state touched).
  TANDEM_ASSIGN_OR_RETURN(const crypto::Ed25519VerifyingKey device,
                          options_.devices->Authenticate(request, source));
  return CheckInAuthenticated(request, device);
}

absl::StatusOr<proto::CheckInResponse> Coordinator::CheckInAuthenticated(
    const proto::CheckInRequest& request, const crypto::Ed25519VerifyingKey& device) {
  if (!request.task_id().empty() && request.task_id() != options_.task_id) {
    return absl::NotFoundError(absl::StrCat("no task '", request.task_id(), "' here"));
  }
  proto::CheckInResponse retry;
  retry.set_task_id(options_.task_id);
  retry.set_outcome(proto::CheckInResponse::OUTCOME_RETRY_LATER);
  retry.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));

  uint64_t round = 0;
  int64_t deadline = 0;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kDone) {
      ++checkins_["done"];
      proto::CheckInResponse done;
      done.set_task_id(options_.task_id);
      done.set_outcome(proto::CheckInResponse::OUTCOME_DONE);
      return done;
    }
    if (phase_ != Phase::kCollecting || NowMs() >= deadline_ms_) {
      ++checkins_["wait"];
      return retry;
    }
    auto it = assigned_.find(request.client_id());
    if (paused_ && (it == assigned_.end() || it->second.done || it->second.recording)) {
      // Paused: no new assignment (an assigned client still gets its own).
      ++checkins_["paused"];
      return retry;
    }
    if (it != assigned_.end()) {
      // A repeated check-in gets the same assignment until it reports done
      // (and waits while its first check-in is still being recorded).
      if (it->second.done || it->second.recording) {
        ++checkins_["wait"];
        return retry;
      }
      ++checkins_["task"];
      proto::CheckInResponse r = assignment_;
      *r.mutable_ticket() = it->second.ticket;
      return r;
    }
    if (EnrollmentOver(NowMs())) {
      ++checkins_["wait"];
      return retry;
    }
    if (!Sampled(aggregation_round_, request.client_id()) ||
        assigned_.size() >= options_.task.secure_sum.max_reports) {
      ++checkins_["not_sampled"];
      return retry;
    }
    // The slot is reserved (it counts against max_reports and keeps the
    // round open); the signature and the durable write happen outside the
    // lock, so that UploadDone, Status and other check-ins do not queue
    // behind this one's fsync.
    assigned_[request.client_id()].recording = true;
    round = aggregation_round_;
    deadline = deadline_ms_;
  }
  absl::StatusOr<proto::SignedUploadTicket> ticket =
      IssueTicket(round, deadline, request.client_id(), device.Raw());
  // Durable before the client learns of it, so that a restart keeps it (the
  // ticket is recomputed from it).
  const absl::Status stored =
      ticket.ok() ? Stored(store_->PutAssignment(round, request.client_id())) : ticket.status();
  absl::MutexLock lock(&mu_);
  const bool same_round = phase_ == Phase::kCollecting && aggregation_round_ == round;
  auto it = assigned_.find(request.client_id());
  if (!same_round || it == assigned_.end()) {
    // The round closed meanwhile (its assignments were reset).
    ++checkins_["wait"];
    return retry;
  }
  if (!stored.ok()) {
    assigned_.erase(it);
    return stored;
  }
  it->second.recording = false;
  it->second.ticket = *std::move(ticket);
  ++checkins_["task"];
  proto::CheckInResponse r = assignment_;
  *r.mutable_ticket() = it->second.ticket;
  return r;
}

absl::StatusOr<std::shared_ptr<const std::string>> Coordinator::ModelBlob(
    const std::string& task_id, uint64_t version) {
  if (task_id != options_.task_id) return absl::NotFoundError(absl::StrCat("no task '", task_id, "'"));
  absl::MutexLock lock(&mu_);
  if (version != model_version_) {
    return absl::NotFoundError(absl::StrCat("model version ", version,
                                            " is not served (current: ", model_version_, ")"));
  }
  return model_blob_;
}

absl::Status Coordinator::UploadDone(const proto::UploadDoneRequest& request) {
  TANDEM_RETURN_IF_ERROR(ValidateId(request.client_id(), "client_id"));
  if (request.report_id().size() != 16) {
    return absl::InvalidArgumentError("report_id must be exactly 16 bytes");
  }
  // Sanity bound only: two key shares are ~270 KB at D = 2^20.
  if (request.bytes_uploaded() > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("bytes_uploaded is implausibly large");
  }
  if (request.task_id() != options_.task_id) {
    return absl::NotFoundError(absl::StrCat("no task '", request.task_id(), "' here"));
  }
  // Before any state is looked at: a caller without the ticket learns nothing.
  if (absl::Status s = CheckUploadTicket(request); !s.ok()) {
    absl::MutexLock lock(&mu_);
    ++unauthenticated_;
    return s;
  }
  // A device revoked after its check-in: its upload no longer counts here.
  TANDEM_RETURN_IF_ERROR(options_.devices->ActiveKey(request.client_id()).status());
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kCollecting || request.round_id() != aggregation_round_) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation round ", request.round_id(), " is not collecting"));
  }
  auto it = assigned_.find(request.client_id());
  if (it == assigned_.end() || it->second.recording) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client ", request.client_id(), " has no assignment in round ", request.round_id()));
  }
  if (it->second.done) {
    if (it->second.report_id == request.report_id()) return absl::OkStatus();  // a retry
    return absl::AlreadyExistsError("this assignment was already reported with another report id");
  }
  TANDEM_RETURN_IF_ERROR(Stored(store_->MarkDone(aggregation_round_, request.client_id(),
                                                 request.report_id(), request.bytes_uploaded())));
  it->second.done = true;
  it->second.report_id = request.report_id();
  it->second.bytes_up = request.bytes_uploaded();
  bytes_up_total_ += request.bytes_uploaded();
  return absl::OkStatus();
}

void Coordinator::AddBytesDown(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  round_bytes_down_ += bytes;
  bytes_down_total_ += bytes;
}

proto::CoordinatorStatusResponse Coordinator::Status() {
  absl::MutexLock lock(&mu_);
  proto::CoordinatorStatusResponse s = StatusLocked();
  for (const proto::RoundSummary& r : history_) *s.add_history() = r;
  return s;
}

proto::CoordinatorStatusResponse Coordinator::StatusSummary() {
  absl::MutexLock lock(&mu_);
  return StatusLocked();
}

std::optional<absl::Duration> Coordinator::TimeToDeadline() {
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kOpening && phase_ != Phase::kCollecting) return std::nullopt;
  return absl::Milliseconds(deadline_ms_ - NowMs());
}

proto::CoordinatorStatusResponse Coordinator::StatusLocked() {
  proto::CoordinatorStatusResponse s;
  s.set_task_id(options_.task_id);
  for (const auto& [role, ms] : skew_.OffsetsMs())
    (*s.mutable_aggregator_clock_offset_ms())[role] = ms;
  s.set_round_id(model_version_ + (phase_ == Phase::kDone ? 0 : 1));
  s.set_completed_rounds(model_version_);
  s.set_epsilon_spent(epsilon_);
  uint64_t up = 0, down = 0;
  for (const proto::RoundSummary& r : history_) {
    up += r.bytes_up();
    down += r.bytes_down();
  }
  s.set_bytes_up(up);
  s.set_bytes_down(down);
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (it->has_evaluation()) continue;  // the held-out accuracy of a released version
    s.set_last_accuracy(it->accuracy());
    break;
  }
  if (last_evaluation_.model_version() > 0) *s.mutable_last_evaluation() = last_evaluation_;
  s.set_phase(paused_ && phase_ == Phase::kIdle ? "paused" : PhaseName(phase_));
  s.set_aggregation_round(aggregation_round_);
  s.set_assigned(assigned_.size());
  uint64_t done = 0;
  for (const auto& [id, a] : assigned_) done += a.done ? 1 : 0;
  s.set_uploads_done(done);
  s.set_total_rounds(options_.rounds);
  s.set_done_reason(done_reason_);
  if (options_.evaluator != nullptr) *s.mutable_worker() = options_.evaluator->Status();
  return s;
}

void Coordinator::SetPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

bool Coordinator::paused() {
  absl::MutexLock lock(&mu_);
  return paused_;
}

absl::Status Coordinator::Cancel(const std::string& reason) {
  Phase phase;
  {
    absl::MutexLock lock(&mu_);
    phase = phase_;
  }
  absl::Status s = absl::OkStatus();
  // An opening or collecting round ends without a release: the aggregators
  // never get its Finalize, so neither releases it, and the store records
  // it abandoned (a restart does not resume it). The aggregators are told
  // too, so that its advance charge leaves their population ledgers (the
  // task will open no next round that would drop it); best effort: an
  // aggregator that cannot be reached keeps the charge, which only
  // overstates the spending.
  if (phase == Phase::kOpening || phase == Phase::kCollecting) {
    uint64_t round;
    {
      absl::MutexLock lock(&mu_);
      round = aggregation_round_;
    }
    s = Abandon(reason);
    for (AggregatorClient* a : {leader_, helper_}) {
      if (absl::Status told = a->AbandonRound(options_.task_id, round);
          !told.ok() && !absl::IsNotFound(told)) {
        TANDEM_LOG(WARNING) << "coordinator: an aggregator keeps round " << round
                            << " of deleted task " << options_.task_id << " charged: " << told;
      }
    }
  }
  absl::MutexLock lock(&mu_);
  phase_ = Phase::kDone;
  done_reason_ = reason;
  assigned_.clear();
  return s;
}

CoordinatorMetrics Coordinator::Metrics() {
  CoordinatorMetrics m;
  m.checkins_refused = options_.devices->Refusals();
  for (const proto::DeviceRecord& d : options_.devices->List()) {
    m.enrolled_devices += d.state() == "enrolled" ? 1 : 0;
  }
  absl::MutexLock lock(&mu_);
  m.status = StatusLocked();  // without the history
  m.store_stalled_seconds = store_stall_.stalled_seconds(clock_->Now());
  for (const char* o : {"task", "not_sampled", "wait", "done", "paused"}) {
    auto it = checkins_.find(o);
    m.checkins[o] = it == checkins_.end() ? 0 : it->second;
  }
  m.rounds_abandoned = abandoned_;
  m.upload_bytes = bytes_up_total_;
  m.download_bytes = bytes_down_total_;
  m.unauthenticated_upload_done = unauthenticated_;
  if (!history_.empty()) m.last_round_accepted_reports = history_.back().accepted_reports();
  return m;
}

}  // namespace tandem::server
