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
#include "aggregator/core/task.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/status_macros.h"

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
  PrepareNoiseLocked(*task, parameters, codec->dimension());
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
      // Whatever the leader has not committed by now is never counted (ids
      // only: their shares are not read).
      TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> pending,
                              task->store->ListReportStates(round_id, ReportFilter::kPending));
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
