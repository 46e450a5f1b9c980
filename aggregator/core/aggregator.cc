#include "aggregator/core/aggregator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "aggregator/core/deterministic.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/norm_verification.h"
#include "aggregator/core/task.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator {
absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "leader") return Role::kLeader;
  if (name == "helper") return Role::kHelper;
  return absl::InvalidArgumentError(absl::StrCat("role must be leader or helper, got '", name, "'"));
}

const char* RoleName(Role role) { return role == Role::kLeader ? "leader" : "helper"; }


std::string EncodeAccumulator(const std::vector<uint64_t>& values) {
  std::string out(values.size() * sizeof(uint64_t), '\0');
  std::memcpy(out.data(), values.data(), out.size());  // x86-64: little endian
  return out;
}

absl::StatusOr<std::vector<uint64_t>> DecodeAccumulator(absl::string_view bytes,
                                                        uint64_t dimension) {
  if (bytes.empty()) return std::vector<uint64_t>(dimension, 0);
  if (bytes.size() != dimension * sizeof(uint64_t)) {
    return absl::DataLossError(absl::StrCat("stored accumulator has ", bytes.size(),
                                            " bytes, expected ", dimension * 8));
  }
  std::vector<uint64_t> values(dimension);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

absl::StatusOr<std::unique_ptr<Aggregator>> Aggregator::Create(AggregatorOptions options,
                                                               StoreFactory store_factory,
                                                               PeerChannel* peer, Clock* clock,
                                                               SecureRandom* noise_random) {
  if (options.verify_batch_size < 1) {
    return absl::InvalidArgumentError("verify_batch_size must be >= 1");
  }
  if (options.checkpoint_reports < 1) {
    return absl::InvalidArgumentError("checkpoint_reports must be >= 1");
  }
  if (options.max_clock_skew < absl::ZeroDuration() || options.max_clock_skew > absl::Hours(1)) {
    return absl::InvalidArgumentError("max_clock_skew must be in [0, 1 h]");
  }
  if (options.role == Role::kLeader && peer == nullptr) {
    return absl::InvalidArgumentError("the leader needs a peer channel to its helper");
  }
  if (!store_factory || clock == nullptr || noise_random == nullptr) {
    return absl::InvalidArgumentError("store factory, clock and noise random are required");
  }
  return std::unique_ptr<Aggregator>(
      new Aggregator(options, std::move(store_factory), peer, clock, noise_random));
}

Aggregator::Aggregator(AggregatorOptions options, StoreFactory store_factory, PeerChannel* peer,
                       Clock* clock, SecureRandom* noise_random)
    : options_(options),
      store_factory_(std::move(store_factory)),
      peer_(peer),
      clock_(clock),
      noise_random_(noise_random) {
  policies_ = std::make_shared<const PolicySet>(options_.policies);
}

Aggregator::~Aggregator() = default;

std::shared_ptr<const PolicySet> Aggregator::policies() const {
  absl::MutexLock lock(&policies_mu_);
  return policies_;
}

void Aggregator::SetPolicies(PolicySet policies) {
  auto fresh = std::make_shared<const PolicySet>(std::move(policies));
  absl::MutexLock lock(&policies_mu_);
  policies_ = std::move(fresh);
}

void Aggregator::PublishProcessStatusLocked(Task& task) {
  proto::AggregatorStatusResponse p;
  p.set_epsilon_spent(task.released_without_noise ? std::numeric_limits<double>::infinity()
                                                  : task.accountant->SpentEpsilon());
  p.set_released_rounds(static_cast<uint64_t>(task.released_rounds));
  p.set_share_expansions(static_cast<uint64_t>(task.share_expansions));
  p.set_undo_expansions(static_cast<uint64_t>(task.undo_expansions));
  p.set_check_evaluations(static_cast<uint64_t>(task.check_evaluations));
  p.set_expansion_seconds(task.expansion_seconds);
  p.set_accumulator_checkpoints(static_cast<uint64_t>(task.checkpoints));
  p.set_cached_share_reads(static_cast<uint64_t>(task.share_cache->hits()));
  p.set_stored_share_reads(static_cast<uint64_t>(task.stored_share_reads));
  absl::MutexLock status_lock(&task.status_mu);
  task.process_status = std::move(p);
}

absl::StatusOr<Aggregator::Task*> Aggregator::GetTask(absl::string_view task_id, bool create) {
  TANDEM_RETURN_IF_ERROR(ValidateId(task_id, "task_id"));
  {
    absl::MutexLock lock(&tasks_mu_);
    auto it = tasks_.find(task_id);
    if (it != tasks_.end()) return it->second.get();
  }
  absl::StatusOr<std::unique_ptr<ReportStore>> store = store_factory_(task_id, create);
  if (absl::IsNotFound(store.status())) {
    return absl::NotFoundError(absl::StrCat("unknown task '", task_id, "'"));
  }
  if (!store.ok()) return store.status();
  auto task = std::make_unique<Task>();
  task->id = std::string(task_id);
  task->store = *std::move(store);
  task->policy = policies()->For(task_id);
  task->share_cache = std::make_unique<PendingShareCache>(options_.pending_share_cache_bytes);
  {
    absl::MutexLock process_lock(&task->process_mu);
    TANDEM_RETURN_IF_ERROR(LoadLatestRoundLocked(*task));
    PublishProcessStatusLocked(*task);
  }
  absl::MutexLock lock(&tasks_mu_);
  auto [it, inserted] = tasks_.try_emplace(task->id, std::move(task));
  return it->second.get();
}

absl::Status Aggregator::OpenRound(const proto::RoundParameters& parameters) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const RoundCodec> codec,
                          CodecForRound(parameters, options_));
  const std::shared_ptr<const PolicySet> policies = this->policies();
  if (!policies->Provisioned(parameters.task_id())) {
    return absl::FailedPreconditionError(
        absl::StrCat("task '", parameters.task_id(),
                     "' is not provisioned on this aggregator: its operator must add it "
                     "(task_policies, the daemon's --task flag, or tandem-admin aggregator "
                     "provision)"));
  }
  // The policy before anything is created or stored for the task.
  TANDEM_RETURN_IF_ERROR(CheckRoundAgainstPolicy(parameters, policies->For(parameters.task_id())));
  // The population's other tasks, before any lock of this one is held.
  TANDEM_RETURN_IF_ERROR(LoadPopulationPeers(parameters.task_id()));
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(parameters.task_id(), /*create=*/true));
  const int64_t round_id = static_cast<int64_t>(parameters.round_id());
  const std::string serialized = SerializeDeterministic(parameters);

  absl::MutexLock process_lock(&task->process_mu);
  // A replica refreshes first: the budget counts every replica's releases.
  if (task->store->replicated() != nullptr) TANDEM_RETURN_IF_ERROR(LoadLatestRoundLocked(*task));
  TANDEM_ASSIGN_OR_RETURN(const double epsilon, EpsilonWith(*task, parameters));
  if (epsilon > task->policy.epsilon_budget) {
    return absl::FailedPreconditionError(absl::StrCat(
        "releasing this round would spend epsilon ", epsilon, " at delta ", task->policy.delta,
        ", above this server's budget ", task->policy.epsilon_budget, " for task ", task->id));
  }
  int64_t current;
  bool closed;
  {
    absl::MutexLock state_lock(&task->state_mu);
    current = task->round_id;
    closed = task->closed;
  }
  if (round_id < current) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", round_id, " is older than the task's round ", current));
  }
  if (round_id == current) {
    // A retry: the round keeps its place on the ledger (a released one has
    // been charged as released).
    if (!closed) TANDEM_RETURN_IF_ERROR(ReservePopulationBudget(*task, parameters));
    return task->store->OpenRound(round_id, serialized);
  }
  TANDEM_RETURN_IF_ERROR(ReservePopulationBudget(*task, parameters));
  if (current != 0 && !closed) {
    // Abandoned without release (the coordinator moved on): close it so that
    // nothing more is accepted for it. Its aggregate never leaves.
    TANDEM_LOG(WARNING) << "task " << task->id << ": round " << current
                        << " abandoned by the opening of round " << round_id;
    TANDEM_RETURN_IF_ERROR(task->store->CloseRound(current));
  }
  TANDEM_RETURN_IF_ERROR(task->store->OpenRound(round_id, serialized));
  absl::MutexLock state_lock(&task->state_mu);
  task->round_id = round_id;
  task->closed = false;
  task->released = false;
  task->parameters = parameters;
  task->query_seed.clear();
  task->received = 0;
  task->accumulator.assign(codec->dimension(), 0);
  task->codec = std::move(codec);
  task->counted = 0;
  task->uncheckpointed.clear();
  task->verified.clear();
  task->peer_missing.clear();
  task->ResetTentative();
  task->share_cache->Clear();
  TANDEM_LOG(INFO) << RoleName(options_.role) << " opened task " << task->id << " round "
                   << round_id << " (D=" << parameters.dimension() << ")";
  return absl::OkStatus();
}

absl::StatusOr<std::string> Aggregator::CheckTicket(const proto::UploadRequest& request,
                                                    proto::UploadTicket* ticket) const {
  if (options_.ticket_key == nullptr) return std::string();
  if (!request.has_ticket()) {
    return absl::UnauthenticatedError("this aggregator accepts uploads with a coordinator ticket only");
  }
  // The key is chosen by the ticket's key id (rotation with overlap: the
  // coordinator's new key and those being rotated out), one check each.
  absl::InlinedVector<const crypto::Ed25519VerifyingKey*, 4> keys = {options_.ticket_key.get()};
  for (const crypto::Ed25519VerifyingKey& k : options_.previous_ticket_keys) keys.push_back(&k);
  absl::StatusOr<proto::UploadTicket> verified =
      crypto::VerifyUploadTicketWithAnyOf(keys, request.ticket());
  TANDEM_ASSIGN_OR_RETURN(*ticket, std::move(verified));
  // Expiry is on the coordinator's clock: checked against this server's
  // less the tolerated skew.
  TANDEM_RETURN_IF_ERROR(crypto::CheckTicketFor(
      *ticket, request.task_id(), request.round_id(), request.report_id(),
      absl::ToUnixMillis(clock_->Now()), absl::ToInt64Milliseconds(options_.max_clock_skew)));
  if (ticket->device_public_key().empty()) {
    if (options_.require_device_bound_tickets) {
      return absl::UnauthenticatedError(
          "this aggregator accepts only tickets bound to a device key");
    }
    if (!request.device_signature().empty()) {
      return absl::UnauthenticatedError("device_signature without a device-bound ticket");
    }
  } else if (request.device_signature().empty()) {
    // Refused before any parsing; the signature itself is checked once the
    // share's digest is known (Upload).
    return absl::UnauthenticatedError("the ticket is bound to a device key: sign the upload");
  }
  return crypto::TicketDigest(request.ticket());
}

absl::StatusOr<proto::UploadResponse> Aggregator::Upload(const proto::UploadRequest& request) {
  return UploadImpl(request, nullptr);
}

absl::StatusOr<proto::UploadResponse> Aggregator::Upload(proto::UploadRequest* request) {
  return UploadImpl(*request, request);
}

absl::StatusOr<proto::UploadResponse> Aggregator::UploadImpl(const proto::UploadRequest& request,
                                                             proto::UploadRequest* movable) {
  // The ticket first: an outsider learns nothing (not even whether the
  // task exists) and costs one signature check.
  proto::UploadTicket ticket;
  TANDEM_ASSIGN_OR_RETURN(const std::string ticket_digest, CheckTicket(request, &ticket));
  TANDEM_RETURN_IF_ERROR(ValidateId(request.task_id(), "task_id"));
  if (request.report_id().size() != kReportIdBytes) {
    return absl::InvalidArgumentError("report_id must be exactly 16 bytes");
  }
  if (!request.has_key_share() && !request.has_dense_share()) {
    return absl::InvalidArgumentError("key_share (or dense_share in a dense round) is missing");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  const int64_t round_id = static_cast<int64_t>(request.round_id());
  if (task->store->replicated() != nullptr) {
    bool ahead;
    {
      absl::ReaderMutexLock lock(&task->state_mu);
      ahead = round_id > task->round_id;
    }
    if (ahead) {  // opened through another replica
      absl::MutexLock process_lock(&task->process_mu);
      TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, round_id));
    }
  }
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock lock(&task->state_mu);
    if (round_id > task->round_id || round_id <= 0) {
      return absl::NotFoundError(absl::StrCat("round ", request.round_id(), " is not open"));
    }
    if (round_id < task->round_id || task->closed) {
      return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
    }
    const int64_t deadline = task->parameters.deadline_unix_ms();
    if (deadline != 0 && absl::ToUnixMillis(clock_->Now() - options_.max_clock_skew) > deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat("round ", round_id, " is past its deadline by this aggregator's clock (",
                       absl::FormatDuration(options_.max_clock_skew), " of skew tolerated)"));
    }
    const int64_t cap = task->parameters.max_reports() != 0 ? task->parameters.max_reports()
                                                            : options_.max_reports_per_round;
    if (task->received >= cap) {
      return absl::ResourceExhaustedError(absl::StrCat("round ", round_id, " is full"));
    }
    codec = task->codec;
  }
  // The share of the round's encoding, well formed for this server.
  TANDEM_RETURN_IF_ERROR(codec->ValidateUpload(request));
  std::string share = codec->EncodeStored(request, ticket_digest);
  // Hashed here, on this upload's thread, not in the group commit's one:
  // the content digest (the store's ShareDigest of `share`), whose
  // public-parts digest the verification reuses (one pass over the bytes).
  std::optional<crypto::ProofDigest> public_digest;
  TANDEM_ASSIGN_OR_RETURN(std::string digest,
                          codec->StoredDigest(request, ticket_digest, share, &public_digest));
  // The device's signature: this digest is the content digest it signed
  // (crypto::UploadContentDigestOf), so the check costs one Ed25519
  // verification. Before any
  // state is read: a stolen ticket learns nothing either.
  if (!ticket.device_public_key().empty()) {
    TANDEM_RETURN_IF_ERROR(crypto::VerifyUploadSignature(
        ticket,
        options_.role == Role::kLeader ? crypto::UploadRole::kLeader : crypto::UploadRole::kHelper,
        ticket_digest, digest, request.device_signature()));
  }

  // The state alone (no share read; on the segment store a reader that does
  // not wait for a group commit in progress). The store checks again in the
  // group commit, so a concurrent duplicate is still caught there.
  TANDEM_ASSIGN_OR_RETURN(const std::optional<ReportRecord> existing,
                          StoredState(*task, request.report_id()));
  if (existing.has_value()) {
    if (existing->round_id == round_id && existing->share_digest == digest) {
      proto::UploadResponse response;  // identical retry
      response.set_accepted_for_verification(true);
      return response;
    }
    return absl::AlreadyExistsError("report id already used");
  }
  // What verification needs, parsed and validated already (share_cache.h):
  // cached once stored, so that a verification pass need not read it back.
  // Not built where nothing is cached (replicas, a zero budget).
  std::shared_ptr<ParsedShare> parsed;
  if (options_.pending_share_cache_bytes > 0 && task->store->replicated() == nullptr) {
    // On an arena sized to the copy (the stored encoding holds the same
    // fields): one allocation.
    if (movable != nullptr) {  // heap messages: the swap moves pointers
      parsed = std::make_shared<ParsedShare>();
      codec->MoveInto(movable, parsed.get());
    } else {
      parsed = std::make_shared<ParsedShare>(share.size());
      codec->CopyInto(request, parsed.get());
    }
    parsed->ticket_digest = ticket_digest;
    parsed->public_digest = public_digest;
  }
  TANDEM_RETURN_IF_ERROR(StoreUpload(
      *task, round_id, PendingReport{request.report_id(), std::move(share), std::move(digest)},
      std::move(parsed)));
  {
    absl::MutexLock lock(&task->state_mu);
    ++task->received;
  }
  proto::UploadResponse response;
  response.set_accepted_for_verification(true);
  return response;
}

absl::StatusOr<std::optional<ReportRecord>> Aggregator::StoredState(Task& task,
                                                                    const std::string& report_id) {
  Task::QueuedCheck mine;
  mine.report_id = report_id;
  task.checks.Submit(&mine, CombiningQueue<Task::QueuedCheck>::TakeAll,
                     [&](const std::vector<Task::QueuedCheck*>& batch) {
                       std::vector<std::string> ids;
                       ids.reserve(batch.size());
                       for (const Task::QueuedCheck* c : batch) ids.push_back(c->report_id);
                       absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> states =
                           task.store->GetReportStates(ids);
                       for (Task::QueuedCheck* c : batch) {
                         if (!states.ok()) {
                           c->state = states.status();
                         } else if (auto it = states->find(c->report_id); it != states->end()) {
                           c->state = it->second;
                         } else {
                           c->state = std::nullopt;
                         }
                       }
                     });
  return std::move(mine.state);
}

absl::Status Aggregator::StoreUpload(Task& task, int64_t round_id, PendingReport report,
                                     std::shared_ptr<const ParsedShare> parsed) {
  Task::QueuedUpload mine;
  mine.round_id = round_id;
  mine.report = std::move(report);
  mine.parsed = std::move(parsed);
  // A batch is everything queued for the round at the head of the queue.
  const auto take = [](std::vector<Task::QueuedUpload*>* queue) {
    const int64_t round = queue->front()->round_id;
    std::vector<Task::QueuedUpload*> batch, rest;
    for (Task::QueuedUpload* u : *queue) (u->round_id == round ? batch : rest).push_back(u);
    *queue = std::move(rest);
    return batch;
  };
  task.uploads.Submit(&mine, take, [&](const std::vector<Task::QueuedUpload*>& batch) {
    const int64_t round = batch.front()->round_id;
    std::vector<PendingReport> reports;
    std::vector<std::shared_ptr<const ParsedShare>> parsed_shares;
    reports.reserve(batch.size());
    // Moved, not copied (134 KB per share at D = 2^20): a waiting upload
    // reads only its status back.
    for (Task::QueuedUpload* u : batch) {
      reports.push_back(std::move(u->report));
      parsed_shares.push_back(std::move(u->parsed));
    }
    absl::StatusOr<std::vector<absl::Status>> results =
        task.store->PutPendingBatch(round, reports);
    // Cached only once durable, and only what the store took as it is (OK:
    // stored now, or an identical retry of a stored report): verification
    // then skips the read-back. (Upload builds no parsed share where nothing
    // is cached; Put ignores a null one.)
    for (size_t i = 0; results.ok() && i < reports.size(); ++i) {
      if (!(*results)[i].ok()) continue;
      task.share_cache->Put(round, reports[i].report_id, std::move(parsed_shares[i]),
                            static_cast<int64_t>(reports[i].share.size()));
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->status = results.ok() ? (*results)[i] : results.status();
    }
  });
  return mine.status;
}

absl::StatusOr<proto::FinalizeResponse> Aggregator::Finalize(
    const proto::FinalizeRequest& request) {
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  const int64_t round_id = static_cast<int64_t>(request.round_id());
  absl::MutexLock process_lock(&task->process_mu);
  TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, round_id));
  bool closed, released;
  proto::RoundParameters params;
  {
    absl::ReaderMutexLock lock(&task->state_mu);
    if (round_id != task->round_id || round_id == 0) {
      return absl::NotFoundError(absl::StrCat("round ", round_id, " is not this task's round"));
    }
    closed = task->closed;
    released = task->released;
    params = task->parameters;
  }
  if (closed && !released) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", round_id, " was closed without release"));
  }
  proto::FinalizeResponse response;
  if (!closed) {
    if (options_.role == Role::kLeader) {
      TANDEM_RETURN_IF_ERROR(ProcessRoundLocked(*task, /*final_pass=*/true).status());
    } else {
      // Whatever the leader has not committed by now is never counted.
      TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> pending,
                              task->store->ListReports(round_id, ReportFilter::kPending));
      std::vector<std::string> reject;
      for (const ReportRecord& r : pending) reject.push_back(r.report_id);
      if (!reject.empty()) TANDEM_RETURN_IF_ERROR(task->store->CommitDecisions(round_id, {}, reject));
    }
    if (task->store->replicated() != nullptr) {
      TANDEM_RETURN_IF_ERROR(ResyncOnError(*task, ReleasePartialsLocked(*task, params)));
    } else {
      TANDEM_RETURN_IF_ERROR(ReleaseLocked(*task, params));
    }
  }
  response.set_accepted_reports(static_cast<uint64_t>(task->counted));

  proto::Tensor* share = response.mutable_aggregate_share();
  share->set_name("aggregate_share");
  share->set_dtype(proto::DTYPE_UINT64);
  share->add_shape(static_cast<int64_t>(task->accumulator.size()));
  share->set_data(EncodeAccumulator(task->accumulator));
  return response;
}

absl::StatusOr<proto::AggregatorStatusResponse> Aggregator::Status(
    const proto::AggregatorStatusRequest& request) {
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  proto::AggregatorStatusResponse response;
  response.set_role(RoleName(options_.role));
  response.set_now_unix_ms(absl::ToUnixMillis(clock_->Now()));
  response.set_max_clock_skew_ms(absl::ToInt64Milliseconds(options_.max_clock_skew));
  int64_t round_id;
  {
    absl::ReaderMutexLock lock(&task->state_mu);
    round_id = task->round_id;
    if (!task->closed) response.set_open_round(static_cast<uint64_t>(round_id));
  }
  if (task->process_mu.TryLock()) {
    PublishProcessStatusLocked(*task);
    task->process_mu.Unlock();
  }
  {
    // A pass is running (perhaps waiting on a hung peer): its last answer.
    absl::MutexLock status_lock(&task->status_mu);
    response.MergeFrom(task->process_status);
  }
  response.set_epsilon_budget(task->policy.epsilon_budget);
  response.set_delta(task->policy.delta);
  response.set_population(policies()->PopulationOf(task->id));
  if (PopulationTasks(task->id).size() == 1) {
    response.set_population_epsilon_spent(response.epsilon_spent());  // its own ledger
  } else {
    TANDEM_ASSIGN_OR_RETURN(const double population_spent, PopulationSpent(*task));
    response.set_population_epsilon_spent(population_spent);
  }
  if (round_id == 0) return response;
  // Counts from the store's index: no share is read.
  TANDEM_ASSIGN_OR_RETURN(const ReportCounts counts, task->store->CountReports(round_id));
  response.set_pending_reports(static_cast<uint64_t>(counts.pending));
  response.set_accepted_reports(static_cast<uint64_t>(counts.accepted));
  response.set_rejected_reports(static_cast<uint64_t>(counts.rejected));
  return response;
}

}  // namespace tandem::aggregator
