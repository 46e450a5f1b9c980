// The verification exchange between leader and helper and the commit of
// decided reports (see aggregator.h for the protocol).
#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/norm_verification.h"
#include "aggregator/core/task.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

// More than any leader sends in one exchange (verify_batch_size); a larger
// request is refused before any store lookup.
constexpr int kMaxChecksPerExchange = 4096;

}  // namespace

absl::StatusOr<int> Aggregator::ProcessPending(absl::string_view task_id) {
  if (options_.role != Role::kLeader) {
    return absl::FailedPreconditionError("only the leader drives verification");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(task_id, /*create=*/false));
  absl::MutexLock lock(&task->process_mu);
  int64_t round_id;
  {
    absl::ReaderMutexLock state_lock(&task->state_mu);
    round_id = task->round_id;
  }
  // A replica notices here (every ProcessAllPending tick) that another one
  // released or abandoned its round and opened the next.
  TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, round_id));
  return ProcessRoundLocked(*task, /*final_pass=*/false);
}

absl::Status Aggregator::ProcessAllPending() {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&tasks_mu_);
    for (const auto& [id, task] : tasks_) ids.push_back(id);
  }
  absl::Status first = absl::OkStatus();
  for (const std::string& id : ids) {
    absl::StatusOr<int> n = ProcessPending(id);
    if (!n.ok() && first.ok()) first = n.status();
  }
  return first;
}

absl::StatusOr<int> Aggregator::ProcessRoundLocked(Task& task, bool final_pass) {
  int64_t round_id;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    if (task.round_id == 0 || task.closed) return 0;
    round_id = task.round_id;
  }
  if (task.store->replicated() != nullptr) return ProcessLeasedLocked(task, round_id, final_pass);
  // States only: the shares come from the upload cache where it has them.
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> pending,
                          task.store->ListReportStates(round_id, ReportFilter::kPending));
  if (!final_pass && !task.peer_missing.empty()) {
    // Reports the helper lacked wait out their backoff before another
    // expansion.
    const absl::Time now = clock_->Now();
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const ReportRecord& r) {
                                   auto it = task.peer_missing.find(r.report_id);
                                   return it != task.peer_missing.end() &&
                                          now < it->second.retry_after;
                                 }),
                  pending.end());
  }
  const size_t batch_size = ExchangeBatchSizeLocked(task);
  int decided = 0;
  for (size_t start = 0; start < pending.size(); start += batch_size) {
    const size_t end = std::min(pending.size(), start + batch_size);
    std::vector<ReportRecord> batch(std::make_move_iterator(pending.begin() + start),
                                    std::make_move_iterator(pending.begin() + end));
    TANDEM_ASSIGN_OR_RETURN(int n, ProcessBatchLocked(task, batch, final_pass));
    decided += n;
  }
  return decided;
}

size_t Aggregator::ExchangeBatchSizeLocked(Task& task) const {
  absl::ReaderMutexLock lock(&task.state_mu);
  if (task.codec == nullptr) return static_cast<size_t>(std::max(1, options_.verify_batch_size));
  return task.codec->ExchangeBatchSize(options_.verify_batch_size);
}

absl::StatusOr<int> Aggregator::ProcessLeasedLocked(Task& task, int64_t round_id,
                                                    bool final_pass) {
  ReplicatedWork& work = *task.store->replicated();
  // Batch by batch, each leased to this replica while it is verified and
  // committed; the leases of reports left pending (the helper lacks them)
  // are given back at the end of the pass, so within the pass a claim never
  // returns them again. The final pass also takes batches other replicas
  // lease (their commits of them are then refused) and decides every one.
  const size_t batch_size = ExchangeBatchSizeLocked(task);
  int decided = 0;
  absl::flat_hash_set<std::string> claimed;  // this pass's, to give back
  absl::Status status = absl::OkStatus();
  while (true) {
    absl::StatusOr<std::vector<ReportRecord>> batch =
        work.ClaimPending(round_id, static_cast<int>(batch_size), final_pass);
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    bool fresh = false;
    for (const ReportRecord& r : *batch) fresh = claimed.insert(r.report_id).second || fresh;
    if (!fresh) break;  // none left, or only reports this pass already tried
    absl::StatusOr<int> n = ProcessBatchLocked(task, *batch, final_pass);
    if (!n.ok()) {
      status = n.status();
      break;
    }
    decided += *n;
  }
  const std::vector<std::string> give_back(claimed.begin(), claimed.end());
  if (absl::Status released = work.ReleaseLeases(round_id, give_back); !released.ok()) {
    // They expire on their own (lease_ms).
    TANDEM_LOG(WARNING) << "task " << task.id << ": giving back leases failed: " << released;
  }
  TANDEM_RETURN_IF_ERROR(ResyncOnError(task, status));
  return decided;
}

absl::StatusOr<int> Aggregator::ProcessBatchLocked(Task& task,
                                                   const std::vector<ReportRecord>& batch,
                                                   bool final_pass, bool seed_retry) {
  int64_t round_id;
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    round_id = task.round_id;
    codec = task.codec;
  }
  const bool proved = codec->has_proof();
  if (proved && task.query_seed.empty()) {
    task.query_seed.assign(crypto::proof::kQuerySeedBytes, '\0');
    TANDEM_RETURN_IF_ERROR(noise_random_->Fill(absl::MakeSpan(
        reinterpret_cast<uint8_t*>(task.query_seed.data()), task.query_seed.size())));
  }
  // Shares were validated at upload; a stored share that no longer parses is
  // rejected here (and named to the helper as rejected).
  std::vector<std::string> rejected;
  std::vector<const ReportRecord*> candidates;
  std::vector<std::shared_ptr<const ParsedShare>> shares;
  {
    std::vector<const ReportRecord*> all;
    for (const ReportRecord& r : batch) all.push_back(&r);
    TANDEM_ASSIGN_OR_RETURN(auto loaded, SharesOfLocked(task, all));
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!loaded[i].ok()) {
        TANDEM_LOG(ERROR) << "stored share fails validation: " << loaded[i].status();
        rejected.push_back(batch[i].report_id);
        continue;
      }
      candidates.push_back(&batch[i]);
      shares.push_back(*std::move(loaded[i]));
    }
  }
  // One expansion per report: each candidate is evaluated once, giving its
  // digest (and, in norm rounds, its verifier share) while it is added into
  // `next`, the tentative aggregate (counted reports plus this batch). What
  // is then not counted is subtracted again before the commit.
  std::vector<uint64_t> next;
  if (!candidates.empty()) next = task.accumulator;
  auto started = std::chrono::steady_clock::now();
  std::vector<const ParsedShare*> ptrs;
  std::vector<std::string> candidate_ids;
  for (size_t i = 0; i < candidates.size(); ++i) {
    ptrs.push_back(shares[i].get());
    candidate_ids.push_back(candidates[i]->report_id);
  }
  TANDEM_ASSIGN_OR_RETURN(ReportChecks checks, codec->Evaluate(ptrs, candidate_ids, task.query_seed,
                                                               absl::MakeSpan(next)));
  const std::vector<crypto::ProofDigest>& digests = checks.digests;
  const std::vector<proto::NormProofVerifierShare>& verifiers = checks.verifiers;
  task.expansion_seconds += SecondsSince(started);

  proto::VerifyRequest request;
  request.set_task_id(task.id);
  request.set_round_id(static_cast<uint64_t>(round_id));
  for (size_t i = 0; i < candidates.size(); ++i) {
    proto::ReportCheck* check = request.add_checks();
    check->set_report_id(candidates[i]->report_id);
    check->set_proof_hash(
        BoundCheckHash(candidates[i]->report_id, shares[i]->ticket_digest, digests[i]));
    check->set_state(proto::PEER_REPORT_PENDING);
    if (proved) *check->mutable_norm_check() = verifiers[i];
  }
  if (proved) request.set_proof_query_seed(task.query_seed);
  absl::flat_hash_map<std::string, proto::ReportCheck> answers;
  if (!candidates.empty()) {
    TANDEM_ASSIGN_OR_RETURN(proto::VerifyResponse response, peer_->Verify(request));
    if (proved && !response.proof_query_seed().empty() &&
        response.proof_query_seed() != task.query_seed) {
      // The helper holds another seed for this round (we restarted): adopt
      // it and ask again, once. A malformed seed is refused.
      if (seed_retry || response.proof_query_seed().size() != crypto::proof::kQuerySeedBytes) {
        return absl::UnavailableError("helper and leader disagree on the proof query seed");
      }
      task.query_seed = response.proof_query_seed();
      return ProcessBatchLocked(task, batch, final_pass, /*seed_retry=*/true);
    }
    for (const proto::ReportCheck& c : response.checks()) answers[c.report_id()] = c;
  }

  // Accepted reports, by index into candidates/shares.
  std::vector<size_t> accepted;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ReportRecord& r = *candidates[i];
    auto it = answers.find(r.report_id);
    const proto::PeerReportState state =
        it == answers.end() ? proto::PEER_REPORT_MISSING : it->second.state();
    switch (state) {
      case proto::PEER_REPORT_PENDING:
        if (it->second.proof_hash() ==
                BoundCheckHash(r.report_id, shares[i]->ticket_digest, digests[i]) &&
            (!proved || codec->Decide(verifiers[i], it->second.norm_check()))) {
          accepted.push_back(i);
        } else {
          rejected.push_back(r.report_id);
        }
        break;
      case proto::PEER_REPORT_COUNTED:
        // The helper counted it on a commit of ours whose ack was lost.
        accepted.push_back(i);
        break;
      case proto::PEER_REPORT_MISSING:
        if (final_pass) {
          rejected.push_back(r.report_id);
        } else {
          Task::PeerMissing& m = task.peer_missing[r.report_id];
          m.misses = std::min(m.misses + 1, 8);
          m.retry_after = clock_->Now() + std::min(absl::Milliseconds(100) * (1 << (m.misses - 1)),
                                                   absl::Seconds(10));
        }
        break;
      default:  // REJECTED, or a malformed answer: never count it.
        rejected.push_back(r.report_id);
        break;
    }
  }
  if (accepted.empty()) {
    // Nothing counted: `next` is discarded whole, so these evaluations
    // served the checks only.
    task.check_evaluations += static_cast<int64_t>(candidates.size());
  } else {
    task.share_expansions += static_cast<int64_t>(candidates.size());
  }
  if (accepted.empty() && rejected.empty()) return 0;

  proto::AcceptedSet commit;
  commit.set_task_id(task.id);
  commit.set_round_id(static_cast<uint64_t>(round_id));
  std::vector<std::string> ids;
  std::vector<bool> counted(candidates.size(), false);
  for (size_t i : accepted) {
    ids.push_back(candidates[i]->report_id);
    counted[i] = true;
  }
  if (!ids.empty()) {
    // Take back out what this batch added but does not count (rejected, or
    // not yet at the helper): the only second expansions.
    std::vector<const ParsedShare*> undo;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!counted[i]) undo.push_back(shares[i].get());
    }
    started = std::chrono::steady_clock::now();
    TANDEM_RETURN_IF_ERROR(codec->Accumulate(undo, absl::MakeSpan(next), /*subtract=*/true));
    task.undo_expansions += static_cast<int64_t>(undo.size());
    task.expansion_seconds += SecondsSince(started);
  }
  for (const std::string& id : ids) commit.add_report_ids(id);
  for (const std::string& id : rejected) commit.add_rejected_ids(id);
  TANDEM_RETURN_IF_ERROR(peer_->CommitAcceptedSet(commit).status());
  TANDEM_RETURN_IF_ERROR(CommitLocked(task, ids, std::move(next), rejected));
  return static_cast<int>(accepted.size() + rejected.size());
}

absl::StatusOr<proto::VerifyResponse> Aggregator::HandleVerify(
    const proto::VerifyRequest& request) {
  if (options_.role != Role::kHelper) {
    return absl::FailedPreconditionError("Verify is served by the helper only");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  if (request.checks_size() > kMaxChecksPerExchange) {
    return absl::InvalidArgumentError("too many checks in one Verify");
  }
  absl::MutexLock lock(&task->process_mu);
  TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, static_cast<int64_t>(request.round_id())));
  int64_t round_id;
  bool closed;
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock state_lock(&task->state_mu);
    round_id = task->round_id;
    closed = task->closed;
    codec = task->codec;
  }
  if (static_cast<int64_t>(request.round_id()) != round_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "helper is at round ", round_id, ", leader asked about ", request.round_id()));
  }
  if (codec == nullptr) return absl::FailedPreconditionError("no round is open");
  proto::VerifyResponse response;
  const bool proved = codec->has_proof();
  if (proved) {
    if (request.proof_query_seed().size() != crypto::proof::kQuerySeedBytes) {
      return absl::InvalidArgumentError("proof_query_seed must be 32 bytes in a norm-bound round");
    }
    if (task->query_seed.empty()) {
      // The round's first seed, durably: after a restart the helper still
      // answers at that seed only, so a leader never gets a second set of
      // query points for a report (the proof is zero-knowledge for one).
      TANDEM_ASSIGN_OR_RETURN(task->query_seed,
                              task->store->BindRoundSecret(round_id, request.proof_query_seed()));
    }
    if (task->query_seed != request.proof_query_seed()) {
      // Answer only at the round's first seed (see task.h); nothing evaluated.
      response.set_proof_query_seed(task->query_seed);
      return response;
    }
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<int> to_digest;  // indices into response.checks()
  std::vector<std::shared_ptr<const ParsedShare>> shares;
  std::vector<std::string> leader_hashes;
  std::vector<const proto::NormProofVerifierShare*> leader_checks;
  std::vector<std::string> ids;
  for (const proto::ReportCheck& c : request.checks()) {
    if (c.report_id().size() != kReportIdBytes || c.proof_hash().size() != 32) {
      return absl::InvalidArgumentError("report_id must be 16 bytes and proof_hash 32 bytes");
    }
    if (!seen.insert(c.report_id()).second) {
      return absl::InvalidArgumentError("duplicate report id in Verify");
    }
    ids.push_back(c.report_id());
  }
  // States first (no share read); then the pending ones' shares, from the
  // upload cache where it has them.
  TANDEM_ASSIGN_OR_RETURN(const auto stored, task->store->GetReportStates(ids));
  std::vector<const ReportRecord*> pending;
  std::vector<int> pending_at;  // indices into request.checks()
  for (const proto::ReportCheck& c : request.checks()) {
    proto::ReportCheck* out = response.add_checks();
    out->set_report_id(c.report_id());
    auto found = stored.find(c.report_id());
    if (found == stored.end() || found->second.round_id != round_id) {
      out->set_state(proto::PEER_REPORT_MISSING);
      continue;
    }
    const ReportRecord* r = &found->second;
    if (r->state == ReportState::kAccepted) {
      out->set_state(proto::PEER_REPORT_COUNTED);
      continue;
    }
    if (r->state == ReportState::kRejected || closed) {
      out->set_state(proto::PEER_REPORT_REJECTED);
      continue;
    }
    pending.push_back(r);
    pending_at.push_back(response.checks_size() - 1);
  }
  TANDEM_ASSIGN_OR_RETURN(auto loaded, SharesOfLocked(*task, pending));
  for (size_t i = 0; i < pending.size(); ++i) {
    const proto::ReportCheck& c = request.checks(pending_at[i]);
    if (!loaded[i].ok()) {  // no longer parses: never counted
      response.mutable_checks(pending_at[i])->set_state(proto::PEER_REPORT_REJECTED);
      continue;
    }
    to_digest.push_back(pending_at[i]);
    shares.push_back(*std::move(loaded[i]));
    leader_hashes.push_back(c.proof_hash());
    leader_checks.push_back(&c.norm_check());
  }
  // Reports not yet in the tentative aggregate are evaluated once, into it
  // (digest and verifier share from the same expansion); the others (asked
  // again, e.g. after a lost answer) are evaluated without adding.
  std::vector<size_t> fresh, again;
  for (size_t i = 0; i < shares.size(); ++i) {
    (task->tentative_ids.contains(response.checks(to_digest[i]).report_id()) ? again : fresh)
        .push_back(i);
  }
  if (!fresh.empty() && task->tentative.empty()) task->tentative.assign(codec->dimension(), 0);
  std::vector<crypto::ProofDigest> digests(shares.size());
  std::vector<proto::NormProofVerifierShare> verifiers(proved ? shares.size() : 0);
  for (const std::vector<size_t>* part : {&fresh, &again}) {
    if (part->empty()) continue;
    const auto started = std::chrono::steady_clock::now();
    const absl::Span<uint64_t> into =
        part == &fresh ? absl::MakeSpan(task->tentative) : absl::Span<uint64_t>();
    std::vector<const ParsedShare*> ptrs;
    std::vector<std::string> ids;
    for (size_t i : *part) {
      ptrs.push_back(shares[i].get());
      ids.push_back(response.checks(to_digest[i]).report_id());
    }
    absl::StatusOr<ReportChecks> checks = codec->Evaluate(ptrs, ids, task->query_seed, into);
    const absl::Status evaluated = checks.status();
    for (size_t j = 0; checks.ok() && j < part->size(); ++j) {
      digests[(*part)[j]] = checks->digests[j];
      if (proved) verifiers[(*part)[j]] = std::move(checks->verifiers[j]);
    }
    if (!evaluated.ok()) {
      // The tentative sum may hold part of this batch: drop it.
      task->ResetTentative();
      return evaluated;
    }
    task->expansion_seconds += SecondsSince(started);
    if (part == &fresh) {
      task->share_expansions += static_cast<int64_t>(fresh.size());
      for (size_t i : fresh) task->tentative_ids.insert(response.checks(to_digest[i]).report_id());
    } else {
      task->check_evaluations += static_cast<int64_t>(again.size());
    }
  }
  for (size_t i = 0; i < to_digest.size(); ++i) {
    proto::ReportCheck* out = response.mutable_checks(to_digest[i]);
    const std::string mine = BoundCheckHash(response.checks(to_digest[i]).report_id(),
                                            shares[i]->ticket_digest, digests[i]);
    out->set_state(proto::PEER_REPORT_PENDING);
    out->set_proof_hash(mine);
    bool valid = mine == leader_hashes[i];
    if (proved) {
      // The same decision the leader takes from the same two shares.
      valid = valid && codec->Decide(verifiers[i], *leader_checks[i]);
      *out->mutable_norm_check() = std::move(verifiers[i]);
    }
    task->verified[out->report_id()] = valid;
  }
  return response;
}

absl::StatusOr<proto::AcceptedSetAck> Aggregator::HandleCommit(const proto::AcceptedSet& request) {
  if (options_.role != Role::kHelper) {
    return absl::FailedPreconditionError("CommitAcceptedSet is served by the helper only");
  }
  if (request.report_ids_size() + request.rejected_ids_size() > kMaxChecksPerExchange) {
    return absl::InvalidArgumentError("too many reports in one commit");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  absl::MutexLock lock(&task->process_mu);
  TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, static_cast<int64_t>(request.round_id())));
  int64_t round_id;
  bool closed;
  {
    absl::ReaderMutexLock state_lock(&task->state_mu);
    round_id = task->round_id;
    closed = task->closed;
  }
  if (static_cast<int64_t>(request.round_id()) != round_id) {
    return absl::FailedPreconditionError("commit for a round that is not the helper's");
  }
  std::vector<std::string> named(request.report_ids().begin(), request.report_ids().end());
  named.insert(named.end(), request.rejected_ids().begin(), request.rejected_ids().end());
  if (absl::flat_hash_set<std::string>(named.begin(), named.end()).size() != named.size()) {
    return absl::InvalidArgumentError("a report id appears twice in the commit");
  }
  // States only: CommitRecordsLocked needs the shares of accepted reports
  // outside the tentative aggregate alone (after a restart), and loads them.
  TANDEM_ASSIGN_OR_RETURN(auto stored, task->store->GetReportStates(named));
  std::vector<ReportRecord> accept;
  for (const std::string& id : request.report_ids()) {
    auto found = stored.find(id);
    if (found == stored.end()) return absl::NotFoundError("report not found");
    ReportRecord r = std::move(found->second);  // each id once (checked above)
    if (r.round_id != round_id) return absl::FailedPreconditionError("report of another round");
    if (r.state == ReportState::kAccepted) continue;  // repeated commit
    auto it = task->verified.find(id);
    if (closed || r.state == ReportState::kRejected || it == task->verified.end() ||
        !it->second) {
      // Never count what this server has not itself seen verified.
      return absl::FailedPreconditionError(
          "commit names a report this helper has not verified as valid");
    }
    accept.push_back(std::move(r));
  }
  std::vector<std::string> reject;
  for (const std::string& id : request.rejected_ids()) {
    auto found = stored.find(id);
    if (found == stored.end()) continue;
    const ReportRecord* r = &found->second;
    if (r->state == ReportState::kAccepted) {
      return absl::FailedPreconditionError("leader rejects a report this helper counted");
    }
    // The helper keeps its own verdicts (aggregator.h): a leader that drops
    // reports the helper verified valid could commit a round of its own
    // reports around one victim's. Refused whole; nothing is committed.
    if (auto it = task->verified.find(id);
        r->state == ReportState::kPending && it != task->verified.end() && it->second) {
      return absl::FailedPreconditionError("leader rejects a report this helper verified as valid");
    }
    if (r->state == ReportState::kPending && r->round_id == round_id) reject.push_back(id);
  }
  TANDEM_RETURN_IF_ERROR(ResyncOnError(*task, CommitRecordsLocked(*task, accept, reject)));
  proto::AcceptedSetAck ack;
  ack.set_accepted_count(static_cast<uint64_t>(task->counted));
  return ack;
}

}  // namespace tandem::aggregator
