#include "aggregator/store/in_memory_report_store.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

bool MatchesFilter(const ReportRecord& r, ReportFilter filter) {
  switch (filter) {
    case ReportFilter::kPending:
      return r.state == ReportState::kPending;
    case ReportFilter::kAcceptedUncounted:
      return r.state == ReportState::kAccepted && !r.counted;
    case ReportFilter::kCounted:
      return r.counted;
    case ReportFilter::kRejected:
      return r.state == ReportState::kRejected;
    case ReportFilter::kAll:
      return true;
  }
  return false;
}

// A copy of `r` without its share (the *States calls).
ReportRecord WithoutShare(const ReportRecord& r) {
  return ReportRecord{r.report_id, r.round_id, r.state, r.counted, r.share_digest, std::string()};
}

absl::Status InMemoryReportStore::OpenRound(int64_t round_id, absl::string_view parameters) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateParameters(parameters));
  absl::MutexLock lock(&mu_);
  auto it = rounds_.find(round_id);
  if (it == rounds_.end()) {
    rounds_[round_id] = RoundRecord{round_id, std::string(parameters), RoundState::kOpen};
    return absl::OkStatus();
  }
  if (it->second.parameters != parameters) {
    return absl::AlreadyExistsError(absl::StrCat("round ", round_id, " exists with other parameters"));
  }
  if (it->second.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::CloseRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  auto it = rounds_.find(round_id);
  if (it == rounds_.end()) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  if (it->second.state == RoundState::kOpen) it->second.state = RoundState::kClosed;
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::ReleaseRound(int64_t round_id, absl::string_view bytes) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, {}));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(RoundRecord * round, OpenRoundLocked(round_id));
  AccumulatorSnapshot& snap = accumulators_[round_id];
  snap.round_id = round_id;
  snap.bytes = std::string(bytes);
  ++snap.version;
  round->state = RoundState::kReleased;
  return absl::OkStatus();
}

absl::StatusOr<ReportCounts> InMemoryReportStore::CountReports(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  ReportCounts counts;
  for (const auto& [id, r] : reports_) {
    if (r.round_id != round_id) continue;
    (r.state == ReportState::kPending    ? counts.pending
     : r.state == ReportState::kAccepted ? counts.accepted
                                         : counts.rejected) += 1;
  }
  return counts;
}

absl::StatusOr<std::string> InMemoryReportStore::BindRoundSecret(int64_t round_id,
                                                                 absl::string_view secret) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateRoundSecret(secret));
  absl::MutexLock lock(&mu_);
  auto round = rounds_.find(round_id);
  if (round == rounds_.end()) {
    return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  }
  auto it = secrets_.find(round_id);
  if (it != secrets_.end()) return it->second;
  if (round->second.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  secrets_[round_id] = std::string(secret);
  return std::string(secret);
}

absl::StatusOr<RoundRecord> InMemoryReportStore::GetRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  auto it = rounds_.find(round_id);
  if (it == rounds_.end()) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  return it->second;
}

absl::StatusOr<std::vector<RoundRecord>> InMemoryReportStore::ListRounds() {
  absl::MutexLock lock(&mu_);
  std::vector<RoundRecord> out;
  for (const auto& [id, record] : rounds_) out.push_back(record);  // std::map: ordered
  return out;
}

absl::StatusOr<RoundRecord*> InMemoryReportStore::OpenRoundLocked(int64_t round_id) {
  auto it = rounds_.find(round_id);
  if (it == rounds_.end()) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  if (it->second.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return &it->second;
}

absl::Status InMemoryReportStore::PutPending(int64_t round_id, absl::string_view report_id,
                                             absl::string_view share) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(round_id).status());
  return PutPendingLocked(round_id, report_id, share, ShareDigest(share));
}

absl::StatusOr<std::vector<absl::Status>> InMemoryReportStore::PutPendingBatch(
    int64_t round_id, absl::Span<const PendingReport> reports) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(round_id).status());
  std::vector<absl::Status> out;
  for (const PendingReport& r : reports) {
    out.push_back(PutPendingLocked(round_id, r.report_id, r.share, DigestOf(r)));
  }
  return out;
}

absl::Status InMemoryReportStore::PutPendingLocked(int64_t round_id, absl::string_view report_id,
                                                   absl::string_view share,
                                                   absl::string_view digest) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  TANDEM_RETURN_IF_ERROR(ValidateShare(share));
  auto it = reports_.find(report_id);
  if (it != reports_.end()) {
    if (it->second.round_id == round_id && it->second.share_digest == digest) return absl::OkStatus();
    return absl::AlreadyExistsError("report id already used (replay or conflicting content)");
  }
  reports_.emplace(std::string(report_id),
                   ReportRecord{std::string(report_id), round_id, ReportState::kPending, false,
                                std::string(digest), std::string(share)});
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::Transition(absl::string_view report_id, ReportState to) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  auto it = reports_.find(report_id);
  if (it == reports_.end()) return absl::NotFoundError("report not found");
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(it->second.round_id).status());
  if (it->second.state == to) return absl::OkStatus();
  if (it->second.state != ReportState::kPending) {
    return absl::FailedPreconditionError("report is no longer pending: transition refused");
  }
  it->second.state = to;
  if (to == ReportState::kRejected) it->second.share.clear();
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::MarkAccepted(absl::string_view report_id) {
  return Transition(report_id, ReportState::kAccepted);
}
absl::Status InMemoryReportStore::MarkRejected(absl::string_view report_id) {
  return Transition(report_id, ReportState::kRejected);
}

absl::StatusOr<ReportRecord> InMemoryReportStore::GetReport(absl::string_view report_id) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  auto it = reports_.find(report_id);
  if (it == reports_.end()) return absl::NotFoundError("report not found");
  return it->second;
}

absl::StatusOr<std::vector<ReportRecord>> InMemoryReportStore::ListReports(int64_t round_id,
                                                                           ReportFilter filter) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  if (!rounds_.count(round_id)) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  std::vector<ReportRecord> out;
  for (const auto& [id, r] : reports_) {  // std::map: ordered by id.
    if (r.round_id == round_id && MatchesFilter(r, filter)) out.push_back(r);
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> InMemoryReportStore::GetReportStates(
    absl::Span<const std::string> report_ids) {
  for (const std::string& id : report_ids) TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, ReportRecord> out;
  for (const std::string& id : report_ids) {
    auto it = reports_.find(id);
    if (it != reports_.end()) out.insert_or_assign(id, WithoutShare(it->second));
  }
  return out;
}

absl::StatusOr<std::vector<ReportRecord>> InMemoryReportStore::ListReportStates(
    int64_t round_id, ReportFilter filter) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  if (!rounds_.count(round_id))
    return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  std::vector<ReportRecord> out;
  for (const auto& [id, r] : reports_) {
    if (r.round_id == round_id && MatchesFilter(r, filter)) out.push_back(WithoutShare(r));
  }
  return out;
}

absl::Status InMemoryReportStore::SaveAccumulator(int64_t round_id, absl::string_view bytes,
                                                  absl::Span<const std::string> newly_counted) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, newly_counted));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(round_id).status());
  // Check everything before changing anything (all or nothing).
  for (const std::string& id : newly_counted) {
    auto it = reports_.find(id);
    if (it == reports_.end() || it->second.round_id != round_id ||
        it->second.state != ReportState::kAccepted || it->second.counted) {
      return absl::FailedPreconditionError(
          "SaveAccumulator: a report is not accepted and uncounted in this round");
    }
  }
  for (const std::string& id : newly_counted) {
    ReportRecord& r = reports_.find(id)->second;
    r.counted = true;
    r.share.clear();
  }
  AccumulatorSnapshot& snap = accumulators_[round_id];
  snap.round_id = round_id;
  snap.bytes = std::string(bytes);
  snap.report_count += static_cast<int64_t>(newly_counted.size());
  ++snap.version;
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::CommitBatch(int64_t round_id, absl::string_view bytes,
                                              absl::Span<const std::string> accept_and_count,
                                              absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch(bytes, accept_and_count, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(round_id).status());
  for (const std::string& id : accept_and_count) {  // all checks first
    auto it = reports_.find(id);
    const bool ok = it != reports_.end() && it->second.round_id == round_id &&
                    (it->second.state == ReportState::kPending ||
                     (it->second.state == ReportState::kAccepted && !it->second.counted));
    if (!ok) return absl::FailedPreconditionError("CommitBatch: a report cannot be counted");
  }
  for (const std::string& id : reject) {
    auto it = reports_.find(id);
    const bool ok = it != reports_.end() && it->second.round_id == round_id &&
                    (it->second.state == ReportState::kPending ||
                     it->second.state == ReportState::kRejected);
    if (!ok) return absl::FailedPreconditionError("CommitBatch: a report cannot be rejected");
  }
  for (const std::string& id : accept_and_count) {
    ReportRecord& r = reports_.find(id)->second;
    r.state = ReportState::kAccepted;
    r.counted = true;
    r.share.clear();
  }
  for (const std::string& id : reject) {
    ReportRecord& r = reports_.find(id)->second;
    r.state = ReportState::kRejected;
    r.share.clear();
  }
  if (!accept_and_count.empty()) {
    AccumulatorSnapshot& snap = accumulators_[round_id];
    snap.round_id = round_id;
    snap.bytes = std::string(bytes);
    snap.report_count += static_cast<int64_t>(accept_and_count.size());
    ++snap.version;
  }
  return absl::OkStatus();
}

absl::Status InMemoryReportStore::CommitDecisions(int64_t round_id,
                                                  absl::Span<const std::string> accept,
                                                  absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch("", accept, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(OpenRoundLocked(round_id).status());
  for (const std::string& id : accept) {  // all checks first
    auto it = reports_.find(id);
    const bool ok = it != reports_.end() && it->second.round_id == round_id &&
                    it->second.state != ReportState::kRejected;
    if (!ok) return absl::FailedPreconditionError("CommitDecisions: a report cannot be accepted");
  }
  for (const std::string& id : reject) {
    auto it = reports_.find(id);
    const bool ok = it != reports_.end() && it->second.round_id == round_id &&
                    it->second.state != ReportState::kAccepted;
    if (!ok) return absl::FailedPreconditionError("CommitDecisions: a report cannot be rejected");
  }
  for (const std::string& id : accept) reports_.find(id)->second.state = ReportState::kAccepted;
  for (const std::string& id : reject) {
    ReportRecord& r = reports_.find(id)->second;
    r.state = ReportState::kRejected;
    r.share.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<AccumulatorSnapshot> InMemoryReportStore::LoadAccumulator(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  if (!rounds_.count(round_id)) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  auto it = accumulators_.find(round_id);
  if (it == accumulators_.end()) return AccumulatorSnapshot{round_id, "", 0, 0};
  return it->second;
}

}  // namespace tandem::aggregator
