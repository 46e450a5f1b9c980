// The commit of decided reports into the accumulator and its checkpoints
// (see aggregator.h and AggregatorOptions::checkpoint_reports).
//
// Why checkpoints, not a snapshot per batch: the accumulator is 8 bytes per
// coordinate (8 MiB at D = 2^20), so writing and syncing it after every
// batch of 64 reports cost more than the batch's expansion on a local disk
// (about 25 ms per 8 MiB fdatasync here). The durable state between
// checkpoints is the last snapshot plus the decided-accepted reports, whose
// shares the store keeps (CommitDecisions); LoadLatestRound re-expands those
// after a restart, so nothing accepted is lost and nothing is counted twice.
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/norm_verification.h"
#include "aggregator/core/task.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

std::vector<const ParsedShare*> Pointers(
    const std::vector<std::shared_ptr<const ParsedShare>>& shares) {
  std::vector<const ParsedShare*> out;
  out.reserve(shares.size());
  for (const auto& s : shares) out.push_back(s.get());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<absl::StatusOr<std::shared_ptr<const ParsedShare>>>>
Aggregator::SharesOfLocked(Task& task, absl::Span<const ReportRecord* const> records) {
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    codec = task.codec;
  }
  const bool ticketed = options_.ticket_key != nullptr;
  using Loaded = absl::StatusOr<std::shared_ptr<const ParsedShare>>;
  auto parse = [&](absl::string_view blob) -> Loaded {
    TANDEM_ASSIGN_OR_RETURN(ParsedShare parsed, codec->ParseStored(blob, ticketed));
    return std::make_shared<const ParsedShare>(std::move(parsed));
  };
  // A record read back from the store (null: the store has no such report).
  auto parse_record = [&](const ReportRecord* r) -> Loaded {
    if (r == nullptr || r->share.empty()) {
      return absl::NotFoundError("the store holds no share for the report");
    }
    return parse(r->share);
  };
  std::vector<Loaded> out(records.size(), absl::InternalError("share not loaded"));
  std::vector<std::string> missing;
  std::vector<size_t> missing_at;
  for (size_t i = 0; i < records.size(); ++i) {
    const ReportRecord& r = *records[i];
    if (!r.share.empty()) {  // read with the record
      ++task.stored_share_reads;
      out[i] = parse(r.share);
    } else if (std::shared_ptr<const ParsedShare> cached =
                   task.share_cache->Get(r.round_id, r.report_id)) {
      out[i] = std::move(cached);
    } else {
      missing.push_back(r.report_id);
      missing_at.push_back(i);
    }
  }
  if (missing.empty()) return out;
  task.stored_share_reads += static_cast<int64_t>(missing.size());
  absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> stored =
      task.store->GetReports(missing);
  if (stored.ok()) {
    for (size_t j = 0; j < missing.size(); ++j) {
      auto it = stored->find(missing[j]);
      out[missing_at[j]] = parse_record(it == stored->end() ? nullptr : &it->second);
    }
    return out;
  }
  if (!absl::IsDataLoss(stored.status())) return stored.status();
  // A damaged record (DATA_LOSS: its digest or header no longer matches)
  // fails the batch read whole. Read the batch again one report at a time,
  // so that only the damaged shares fail, each as its own entry: the
  // callers reject those reports (never summed) and go on with the others,
  // instead of failing every exchange of the round on one bad record. Any
  // other error still fails the call (the caller retries).
  for (size_t j = 0; j < missing.size(); ++j) {
    absl::StatusOr<ReportRecord> one = task.store->GetReport(missing[j]);
    if (absl::IsDataLoss(one.status())) {
      TANDEM_LOG(ERROR) << "task " << task.id << ": the stored share of report "
                        << absl::CHexEscape(missing[j]) << " is damaged, so the report "
                        << "is rejected: " << one.status();
      out[missing_at[j]] = one.status();
    } else if (!one.ok() && !absl::IsNotFound(one.status())) {
      return one.status();
    } else {
      out[missing_at[j]] = parse_record(one.ok() ? &*one : nullptr);
    }
  }
  return out;
}

absl::Status Aggregator::CommitRecordsLocked(Task& task, const std::vector<ReportRecord>& accepted,
                                             const std::vector<std::string>& rejected) {
  if (accepted.empty()) return CommitLocked(task, {}, {}, rejected);
  int64_t round_id;
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    round_id = task.round_id;
    codec = task.codec;
  }
  // next = counted + the accepted reports. Those in the tentative aggregate
  // (expanded at Verify) come from it, the tentative ones not accepted are
  // subtracted, the others are expanded now (after a restart, or a commit
  // for an exchange whose tentative sum was reset).
  std::vector<uint64_t> next = task.accumulator;
  absl::flat_hash_set<std::string> accepted_ids;
  for (const ReportRecord& r : accepted) accepted_ids.insert(r.report_id);
  // The shares to expand: tentative reports not accepted (to take out) and
  // accepted reports not in the tentative aggregate (to add).
  std::vector<ReportRecord> undo_records;
  std::vector<const ReportRecord*> undo_of, fresh_of;
  const bool used_tentative = !task.tentative_ids.empty();
  if (used_tentative) {
    TANDEM_RETURN_IF_ERROR(
        AddAccumulator(absl::MakeSpan(next), task.tentative, codec->value_bits()));
    for (const std::string& id : task.tentative_ids) {
      if (accepted_ids.contains(id)) continue;
      ReportRecord r;
      r.report_id = id;
      r.round_id = round_id;
      undo_records.push_back(std::move(r));
    }
    for (const ReportRecord& r : undo_records) undo_of.push_back(&r);
  }
  std::vector<std::string> ids;
  for (const ReportRecord& r : accepted) {
    ids.push_back(r.report_id);
    if (!task.tentative_ids.contains(r.report_id)) fresh_of.push_back(&r);
  }
  std::vector<std::shared_ptr<const ParsedShare>> fresh, undo;
  for (auto [of, into] : {std::pair{&undo_of, &undo}, std::pair{&fresh_of, &fresh}}) {
    TANDEM_ASSIGN_OR_RETURN(auto loaded, SharesOfLocked(task, *of));
    for (auto& share : loaded) {
      if (!share.ok()) return share.status();
      into->push_back(*std::move(share));
    }
  }
  const auto started = std::chrono::steady_clock::now();
  TANDEM_RETURN_IF_ERROR(codec->Accumulate(Pointers(fresh), absl::MakeSpan(next), false));
  TANDEM_RETURN_IF_ERROR(codec->Accumulate(Pointers(undo), absl::MakeSpan(next), true));
  task.share_expansions += static_cast<int64_t>(fresh.size());
  task.undo_expansions += static_cast<int64_t>(undo.size());
  task.expansion_seconds += SecondsSince(started);
  TANDEM_RETURN_IF_ERROR(CommitLocked(task, ids, std::move(next), rejected));
  if (used_tentative) task.ResetTentative();
  return absl::OkStatus();
}

absl::Status Aggregator::CommitLocked(Task& task, const std::vector<std::string>& ids,
                                      std::vector<uint64_t> next,
                                      const std::vector<std::string>& rejected) {
  int64_t round_id;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    round_id = task.round_id;
  }
  // One transaction either way: states (and, at a checkpoint, the
  // accumulator) change together or not at all.
  const bool checkpoint = !ids.empty() && task.uncheckpointed.size() + ids.size() >=
                                              static_cast<size_t>(options_.checkpoint_reports);
  if (checkpoint) {
    std::vector<std::string> count = task.uncheckpointed;
    count.insert(count.end(), ids.begin(), ids.end());
    TANDEM_RETURN_IF_ERROR(
        task.store->CommitBatch(round_id, EncodeAccumulator(next), count, rejected));
    task.uncheckpointed.clear();
    ++task.checkpoints;
  } else if (!ids.empty() || !rejected.empty()) {
    // Decisions only: the accepted keep their shares until the checkpoint.
    TANDEM_RETURN_IF_ERROR(task.store->CommitDecisions(round_id, ids, rejected));
    task.uncheckpointed.insert(task.uncheckpointed.end(), ids.begin(), ids.end());
  }
  if (!ids.empty()) {
    task.accumulator = std::move(next);
    task.last_commit = clock_->Now();
  }
  task.counted += static_cast<int64_t>(ids.size());
  for (const std::string& id : ids) task.verified.erase(id);
  for (const std::string& id : rejected) task.verified.erase(id);
  for (const std::string& id : ids) task.peer_missing.erase(id);
  for (const std::string& id : rejected) task.peer_missing.erase(id);
  task.share_cache->Erase(ids);
  task.share_cache->Erase(rejected);
  return absl::OkStatus();
}

absl::Status Aggregator::CheckpointLocked(Task& task) {
  if (task.uncheckpointed.empty()) return absl::OkStatus();
  int64_t round_id;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    round_id = task.round_id;
  }
  TANDEM_RETURN_IF_ERROR(task.store->SaveAccumulator(round_id, EncodeAccumulator(task.accumulator),
                                                     task.uncheckpointed));
  task.uncheckpointed.clear();
  ++task.checkpoints;
  return absl::OkStatus();
}

absl::Status Aggregator::SaveIdlePartials() {
  if (options_.idle_checkpoint == absl::InfiniteDuration()) return absl::OkStatus();
  std::vector<Task*> tasks;  // tasks are never removed: the pointers stay valid
  {
    absl::MutexLock lock(&tasks_mu_);
    for (const auto& [id, task] : tasks_) {
      if (task->store->replicated() != nullptr) tasks.push_back(task.get());
    }
  }
  absl::Status first = absl::OkStatus();
  for (Task* task : tasks) {
    absl::MutexLock lock(&task->process_mu);
    bool open;
    {
      absl::ReaderMutexLock state_lock(&task->state_mu);
      open = task->round_id != 0 && !task->closed;
    }
    if (!open || task->uncheckpointed.empty() ||
        clock_->Now() - task->last_commit < options_.idle_checkpoint) {
      continue;
    }
    absl::Status s = ResyncOnError(*task, CheckpointLocked(*task));
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace tandem::aggregator
