// The verification exchange between leader and helper and the commit of
// decided reports (see aggregator.h for the protocol).
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

std::vector<const proto::SparseKeySet*> KeysOf(const std::vector<ParsedShare>& shares) {
  std::vector<const proto::SparseKeySet*> out;
  out.reserve(shares.size());
  for (const ParsedShare& s : shares) out.push_back(&s.keys);
  return out;
}

}  // namespace

absl::StatusOr<int> Aggregator::ProcessPending(absl::string_view task_id) {
  if (options_.role != Role::kLeader) {
    return absl::FailedPreconditionError("only the leader drives verification");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(task_id, /*create=*/false));
  absl::MutexLock lock(&task->process_mu);
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
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> pending,
                          task.store->ListReports(round_id, ReportFilter::kPending));
  int decided = 0;
  for (size_t start = 0; start < pending.size();
       start += static_cast<size_t>(options_.verify_batch_size)) {
    const size_t end =
        std::min(pending.size(), start + static_cast<size_t>(options_.verify_batch_size));
    std::vector<ReportRecord> batch(std::make_move_iterator(pending.begin() + start),
                                    std::make_move_iterator(pending.begin() + end));
    TANDEM_ASSIGN_OR_RETURN(int n, ProcessBatchLocked(task, batch, final_pass));
    decided += n;
  }
  return decided;
}

absl::StatusOr<int> Aggregator::ProcessBatchLocked(Task& task,
                                                   const std::vector<ReportRecord>& batch,
                                                   bool final_pass, bool seed_retry) {
  crypto::ExpectedKeySetShape shape;
  int64_t round_id;
  std::shared_ptr<const crypto::proof::NormProofSystem> proof;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    shape = task.shape;
    round_id = task.round_id;
    proof = task.proof;
  }
  const bool ticketed = options_.ticket_key != nullptr;
  if (proof != nullptr && task.query_seed.empty()) {
    task.query_seed.assign(crypto::proof::kQuerySeedBytes, '\0');
    TANDEM_RETURN_IF_ERROR(noise_random_->Fill(absl::MakeSpan(
        reinterpret_cast<uint8_t*>(task.query_seed.data()), task.query_seed.size())));
  }
  // Shares were validated at upload; a stored share that no longer parses is
  // rejected here (and named to the helper as rejected).
  std::vector<std::string> rejected;
  std::vector<const ReportRecord*> candidates;
  std::vector<ParsedShare> shares;
  shares.reserve(batch.size());
  for (const ReportRecord& r : batch) {
    absl::StatusOr<ParsedShare> keys = ParseStoredShare(r.share, shape, proof.get(), 0, ticketed);
    if (!keys.ok()) {
      TANDEM_LOG(ERROR) << "stored share fails validation: " << keys.status();
      rejected.push_back(r.report_id);
      continue;
    }
    candidates.push_back(&r);
    shares.push_back(*std::move(keys));
  }
  std::vector<crypto::ProofDigest> digests(candidates.size());
  std::vector<proto::NormProofVerifierShare> verifiers;
  if (proof != nullptr) {
    // Norm rounds: one full expansion per report gives the digest and the
    // proof's inputs (not cached: the verifier share depends on the seed).
    std::vector<const ParsedShare*> ptrs;
    std::vector<std::string> ids;
    for (size_t i = 0; i < candidates.size(); ++i) {
      ptrs.push_back(&shares[i]);
      ids.push_back(candidates[i]->report_id);
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<NormEvaluation> evals,
                            EvaluateNormChecks(*task.dpf, *proof, 0, ptrs, ids, task.query_seed));
    for (size_t i = 0; i < evals.size(); ++i) {
      digests[i] = evals[i].digest;
      verifiers.push_back(std::move(evals[i].verifier));
    }
  } else {
    std::vector<const proto::SparseKeySet*> to_compute;
    std::vector<size_t> positions;
    for (size_t i = 0; i < candidates.size(); ++i) {
      auto it = task.digest_cache.find(candidates[i]->report_id);
      if (it != task.digest_cache.end()) {
        digests[i] = it->second;
      } else {
        to_compute.push_back(&shares[i].keys);
        positions.push_back(i);
      }
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<crypto::ProofDigest> computed,
                            ComputeDigests(*task.dpf, to_compute));
    for (size_t j = 0; j < positions.size(); ++j) {
      digests[positions[j]] = computed[j];
      task.digest_cache[candidates[positions[j]]->report_id] = computed[j];
    }
  }

  proto::VerifyRequest request;
  request.set_task_id(task.id);
  request.set_round_id(static_cast<uint64_t>(round_id));
  for (size_t i = 0; i < candidates.size(); ++i) {
    proto::ReportCheck* check = request.add_checks();
    check->set_report_id(candidates[i]->report_id);
    check->set_proof_hash(
        BoundCheckHash(candidates[i]->report_id, shares[i].ticket_digest, digests[i]));
    check->set_state(proto::PEER_REPORT_PENDING);
    if (proof != nullptr) *check->mutable_norm_check() = verifiers[i];
  }
  if (proof != nullptr) request.set_proof_query_seed(task.query_seed);
  absl::flat_hash_map<std::string, proto::ReportCheck> answers;
  if (!candidates.empty()) {
    TANDEM_ASSIGN_OR_RETURN(proto::VerifyResponse response, peer_->Verify(request));
    if (proof != nullptr && !response.proof_query_seed().empty() &&
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
                BoundCheckHash(r.report_id, shares[i].ticket_digest, digests[i]) &&
            (proof == nullptr || proof->Decide(verifiers[i], it->second.norm_check()))) {
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
        if (final_pass) rejected.push_back(r.report_id);
        break;
      default:  // REJECTED, or a malformed answer: never count it.
        rejected.push_back(r.report_id);
        break;
    }
  }
  if (accepted.empty() && rejected.empty()) return 0;

  proto::AcceptedSet commit;
  commit.set_task_id(task.id);
  commit.set_round_id(static_cast<uint64_t>(round_id));
  std::vector<std::string> ids;
  std::vector<const proto::SparseKeySet*> accepted_shares;
  for (size_t i : accepted) {
    ids.push_back(candidates[i]->report_id);
    accepted_shares.push_back(&shares[i].keys);
  }
  for (const std::string& id : ids) commit.add_report_ids(id);
  for (const std::string& id : rejected) commit.add_rejected_ids(id);
  TANDEM_RETURN_IF_ERROR(peer_->CommitAcceptedSet(commit).status());
  // The shares parsed for the digests are expanded as they are: no re-parse.
  TANDEM_RETURN_IF_ERROR(CommitLocked(task, ids, accepted_shares, rejected));
  return static_cast<int>(accepted.size() + rejected.size());
}

absl::Status Aggregator::CommitRecordsLocked(Task& task,
                                             const std::vector<ReportRecord>& accepted,
                                             const std::vector<std::string>& rejected) {
  crypto::ExpectedKeySetShape shape;
  std::shared_ptr<const crypto::proof::NormProofSystem> proof;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    shape = task.shape;
    proof = task.proof;
  }
  std::vector<ParsedShare> shares;
  std::vector<std::string> ids;
  for (const ReportRecord& r : accepted) {
    TANDEM_ASSIGN_OR_RETURN(ParsedShare parsed,
                            ParseStoredShare(r.share, shape, proof.get(),
                                             static_cast<int>(options_.role),
                                             options_.ticket_key != nullptr));
    shares.push_back(std::move(parsed));
    ids.push_back(r.report_id);
  }
  return CommitLocked(task, ids, KeysOf(shares), rejected);
}

absl::Status Aggregator::CommitLocked(Task& task, const std::vector<std::string>& ids,
                                      const std::vector<const proto::SparseKeySet*>& shares,
                                      const std::vector<std::string>& rejected) {
  int64_t round_id;
  {
    absl::ReaderMutexLock lock(&task.state_mu);
    round_id = task.round_id;
  }
  std::vector<uint64_t> next = task.accumulator;
  TANDEM_RETURN_IF_ERROR(AccumulateShares(*task.dpf, shares, absl::MakeSpan(next)));
  // One transaction: states and accumulator change together or not at all.
  TANDEM_RETURN_IF_ERROR(task.store->CommitBatch(
      round_id, ids.empty() ? std::string() : EncodeAccumulator(next), ids, rejected));
  task.accumulator = std::move(next);
  task.counted += static_cast<int64_t>(ids.size());
  for (const std::string& id : ids) {
    task.verified.erase(id);
    task.digest_cache.erase(id);
  }
  for (const std::string& id : rejected) {
    task.verified.erase(id);
    task.digest_cache.erase(id);
  }
  return absl::OkStatus();
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
  int64_t round_id;
  bool closed;
  crypto::ExpectedKeySetShape shape;
  std::shared_ptr<const crypto::proof::NormProofSystem> proof;
  {
    absl::ReaderMutexLock state_lock(&task->state_mu);
    round_id = task->round_id;
    closed = task->closed;
    shape = task->shape;
    proof = task->proof;
  }
  if (static_cast<int64_t>(request.round_id()) != round_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "helper is at round ", round_id, ", leader asked about ", request.round_id()));
  }
  proto::VerifyResponse response;
  if (proof != nullptr) {
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
  std::vector<ParsedShare> shares;
  std::vector<std::string> leader_hashes;
  std::vector<const proto::NormProofVerifierShare*> leader_checks;
  for (const proto::ReportCheck& c : request.checks()) {
    if (c.report_id().size() != kReportIdBytes || c.proof_hash().size() != 32) {
      return absl::InvalidArgumentError("report_id must be 16 bytes and proof_hash 32 bytes");
    }
    if (!seen.insert(c.report_id()).second) {
      return absl::InvalidArgumentError("duplicate report id in Verify");
    }
    proto::ReportCheck* out = response.add_checks();
    out->set_report_id(c.report_id());
    absl::StatusOr<ReportRecord> r = task->store->GetReport(c.report_id());
    if (absl::IsNotFound(r.status()) || (r.ok() && r->round_id != round_id)) {
      out->set_state(proto::PEER_REPORT_MISSING);
      continue;
    }
    if (!r.ok()) return r.status();
    if (r->state == ReportState::kAccepted) {
      out->set_state(proto::PEER_REPORT_COUNTED);
      continue;
    }
    if (r->state == ReportState::kRejected || closed) {
      out->set_state(proto::PEER_REPORT_REJECTED);
      continue;
    }
    absl::StatusOr<ParsedShare> keys = ParseStoredShare(r->share, shape, proof.get(), 1,
                                                          options_.ticket_key != nullptr);
    if (!keys.ok()) {
      out->set_state(proto::PEER_REPORT_REJECTED);
      continue;
    }
    to_digest.push_back(response.checks_size() - 1);
    shares.push_back(*std::move(keys));
    leader_hashes.push_back(c.proof_hash());
    leader_checks.push_back(&c.norm_check());
  }
  std::vector<crypto::ProofDigest> digests;
  std::vector<proto::NormProofVerifierShare> verifiers;
  if (proof != nullptr) {
    std::vector<const ParsedShare*> ptrs;
    std::vector<std::string> ids;
    for (size_t i = 0; i < shares.size(); ++i) {
      ptrs.push_back(&shares[i]);
      ids.push_back(response.checks(to_digest[i]).report_id());
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<NormEvaluation> evals,
                            EvaluateNormChecks(*task->dpf, *proof, 1, ptrs, ids, task->query_seed));
    for (NormEvaluation& e : evals) {
      digests.push_back(e.digest);
      verifiers.push_back(std::move(e.verifier));
    }
  } else {
    TANDEM_ASSIGN_OR_RETURN(digests, ComputeDigests(*task->dpf, KeysOf(shares)));
  }
  for (size_t i = 0; i < to_digest.size(); ++i) {
    proto::ReportCheck* out = response.mutable_checks(to_digest[i]);
    const std::string mine = BoundCheckHash(response.checks(to_digest[i]).report_id(),
                                            shares[i].ticket_digest, digests[i]);
    out->set_state(proto::PEER_REPORT_PENDING);
    out->set_proof_hash(mine);
    bool valid = mine == leader_hashes[i];
    if (proof != nullptr) {
      // The same decision the leader takes from the same two shares.
      valid = valid && proof->Decide(verifiers[i], *leader_checks[i]);
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
  std::vector<ReportRecord> accept;
  for (const std::string& id : request.report_ids()) {
    TANDEM_ASSIGN_OR_RETURN(ReportRecord r, task->store->GetReport(id));
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
    absl::StatusOr<ReportRecord> r = task->store->GetReport(id);
    if (absl::IsNotFound(r.status())) continue;
    if (!r.ok()) return r.status();
    if (r->state == ReportState::kAccepted) {
      return absl::FailedPreconditionError("leader rejects a report this helper counted");
    }
    if (r->state == ReportState::kPending && r->round_id == round_id) reject.push_back(id);
  }
  TANDEM_RETURN_IF_ERROR(CommitRecordsLocked(*task, accept, reject));
  proto::AcceptedSetAck ack;
  ack.set_accepted_count(static_cast<uint64_t>(task->counted));
  return ack;
}

}  // namespace tandem::aggregator
