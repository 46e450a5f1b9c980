// Loading a task's state from its store: at first use after a (re)start,
// and -- for replicas sharing one store (ReplicatedWork, issue 24) -- again
// whenever another replica has moved the task on (a round opened, released
// or abandoned elsewhere) or has taken reports this one held.
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/task.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

absl::Status Aggregator::LoadLatestRoundLocked(Task& task) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<RoundRecord> rounds, task.store->ListRounds());
  // The accountant is the store's released rounds, replayed (also those
  // another replica released).
  TANDEM_ASSIGN_OR_RETURN(dp::PrivacyAccountant accountant, MakeAccountant(task.policy));
  task.accountant.emplace(std::move(accountant));
  LedgerReset(task.id);  // rebuilt with the accountant
  task.released_rounds = 0;
  task.released_without_noise = false;
  for (const RoundRecord& r : rounds) {
    if (r.state != RoundState::kReleased) continue;
    proto::RoundParameters released;
    if (!released.ParseFromString(r.parameters)) {
      return absl::DataLossError("stored round parameters do not parse");
    }
    TANDEM_RETURN_IF_ERROR(ChargeRelease(task, released));
  }
  if (rounds.empty()) return absl::OkStatus();
  const RoundRecord* latest = &rounds[0];
  for (const RoundRecord& r : rounds) {
    if (r.round_id > latest->round_id) latest = &r;
  }
  proto::RoundParameters params;
  if (!params.ParseFromString(latest->parameters)) {
    return absl::DataLossError("stored round parameters do not parse");
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const RoundCodec> codec, CodecForRound(params, options_));
  TANDEM_ASSIGN_OR_RETURN(AccumulatorSnapshot snapshot,
                          task.store->LoadAccumulator(latest->round_id));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> acc,
                          DecodeAccumulator(snapshot.bytes, params.dimension()));
  // Counts from the index; shares only of the reports to re-expand.
  TANDEM_ASSIGN_OR_RETURN(const ReportCounts counts, task.store->CountReports(latest->round_id));
  const bool closed = latest->state != RoundState::kOpen;
  if (!closed) {
    // Its release may still come: the population's ledger counts it.
    TANDEM_ASSIGN_OR_RETURN(const double z, NoiseMultiplierOf(params));
    LedgerHoldOpen(task.id, task.policy.sampling_rate, z, latest->round_id);
  }
  std::vector<ReportRecord> uncounted;
  if (!closed) {
    TANDEM_ASSIGN_OR_RETURN(
        uncounted, task.store->ListReports(latest->round_id, ReportFilter::kAcceptedUncounted));
  }
  const uint64_t dimension = codec->dimension();
  bool same_round;
  {
    absl::MutexLock state_lock(&task.state_mu);
    same_round = task.round_id == latest->round_id;
    task.round_id = latest->round_id;
    task.closed = closed;
    task.released = latest->state == RoundState::kReleased;
    task.parameters = params;
    task.codec = std::move(codec);
    task.received = counts.pending + counts.accepted + counts.rejected;
  }
  if (!same_round) {
    task.verified.clear();
    task.query_seed.clear();
  }
  if (closed) {
    task.prepared_noise.reset();
  } else {
    PrepareNoiseLocked(task, params, dimension);
  }
  task.ResetTentative();
  task.uncheckpointed.clear();
  task.accumulator = std::move(acc);
  task.counted = snapshot.report_count;

  // Reports both servers accepted after the last accumulator checkpoint
  // (or before a crash) keep their shares: expand them into it again. A
  // replica re-expands only those in its own partial.
  if (!uncounted.empty()) {
    TANDEM_LOG(INFO) << "task " << task.id << " round " << latest->round_id << ": re-expanding "
                     << uncounted.size() << " accepted reports after the last checkpoint";
    TANDEM_RETURN_IF_ERROR(CommitRecordsLocked(task, uncounted, {}));
  }
  TANDEM_LOG(INFO) << RoleName(options_.role) << " loaded task " << task.id << " round "
                   << latest->round_id << (closed ? " (closed)" : " (open)") << ", " << task.counted
                   << " reports counted, " << task.received << " received";
  return absl::OkStatus();
}

absl::Status Aggregator::RefreshIfStale(Task& task, int64_t round_id) {
  ReplicatedWork* const work = task.store->replicated();
  if (work == nullptr) return absl::OkStatus();
  int64_t current;
  bool closed;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    current = task.round_id;
    closed = task.closed;
  }
  if (round_id > current) {
    // Only a round the store holds (a ticketed upload may name a round no
    // replica opened): otherwise nothing to load.
    absl::StatusOr<RoundRecord> newer = task.store->GetRound(round_id);
    if (absl::IsNotFound(newer.status())) return absl::OkStatus();
    if (!newer.ok()) return newer.status();
    return LoadLatestRoundLocked(task);
  }
  if (current == 0) {
    // Loaded before the task had a round (e.g. this replica's OpenRound was
    // refused): whatever round another replica opened since.
    TANDEM_ASSIGN_OR_RETURN(const std::vector<RoundRecord> rounds, task.store->ListRounds());
    return rounds.empty() ? absl::OkStatus() : LoadLatestRoundLocked(task);
  }
  if (round_id != current || closed) return absl::OkStatus();
  // Another replica may have released (or abandoned) this round.
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord stored, task.store->GetRound(round_id));
  if (stored.state != RoundState::kOpen) return LoadLatestRoundLocked(task);
  return absl::OkStatus();
}

absl::Status Aggregator::ResyncOnError(Task& task, absl::Status status) {
  if (status.ok() || task.store->replicated() == nullptr) return status;
  if (!absl::IsFailedPrecondition(status) && !absl::IsAborted(status)) return status;
  // Another replica took reports this one held (an expired lease, an
  // adoption at Finalize) or closed the round: start again from the store.
  if (absl::Status reload = LoadLatestRoundLocked(task); !reload.ok()) {
    TANDEM_LOG(WARNING) << "task " << task.id << ": reload after '" << status
                        << "' failed: " << reload;
  }
  return status;
}

}  // namespace tandem::aggregator
