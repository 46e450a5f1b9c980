// SegmentReportStore, part 2: reports and accumulators (opening and the
// round-level calls: segment_report_store_rounds.cc).
#include "aggregator/store/segment_report_store.h"

#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "aggregator/store/sqlite_rounds.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

using sqlite::CachedStatement;
using sqlite::Statement;
using sqlite::Transaction;

// The record tags (segment_file.h): a share's digest prefix, a snapshot's
// round id.
absl::string_view ShareTag(absl::string_view digest) {
  return digest.substr(0, SegmentFiles::kTagBytes);
}
std::string RoundTag(int64_t round_id) {
  std::string tag(SegmentFiles::kTagBytes, '\0');
  for (size_t i = 0; i < tag.size(); ++i) tag[i] = static_cast<char>((round_id >> (8 * i)) & 0xff);
  return tag;
}

constexpr absl::string_view kDropShare = "seg = NULL, off = NULL, len = NULL";

constexpr absl::string_view kReportColumns =
    "report_id, round_id, state, counted, share_digest, seg, off, len";


absl::string_view FilterSql(ReportFilter filter) {
  switch (filter) {
    case ReportFilter::kPending:
      return "state = 0";
    case ReportFilter::kAcceptedUncounted:
      return "state = 1 AND counted = 0";
    case ReportFilter::kCounted:
      return "counted = 1";
    case ReportFilter::kRejected:
      return "state = 2";
    case ReportFilter::kAll:
      break;
  }
  return "1";
}

// The round's reports matching `filter`, ordered by id (kReportColumns).
std::string ListSql(ReportFilter filter) {
  return absl::StrCat("SELECT ", kReportColumns, " FROM reports WHERE round_id = ?1 AND ",
                      FilterSql(filter), " ORDER BY report_id");
}

// Steps `st` (bound to `round_id` as ?1) to its end, decoding every row.
template <typename Decode>
absl::StatusOr<std::vector<ReportRecord>> CollectRows(Statement& st, int64_t round_id,
                                                      Decode decode) {
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, round_id));
  std::vector<ReportRecord> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    TANDEM_ASSIGN_OR_RETURN(ReportRecord r, decode(st));
    out.push_back(std::move(r));
  }
  return out;
}

// Decodes and checks one reports row (kReportColumns) without reading its
// share; *loc is where the share lies when the report keeps one.
absl::StatusOr<ReportRecord> DecodeReportRow(const Statement& st,
                                             std::optional<ShareLocation>* loc) {
  ReportRecord r;
  r.report_id = st.ColumnBlob(0);
  r.round_id = st.ColumnInt64(1);
  const int64_t state = st.ColumnInt64(2);
  const int64_t counted = st.ColumnInt64(3);
  r.share_digest = st.ColumnBlob(4);
  TANDEM_RETURN_IF_ERROR(CheckStoredReportRow(state, counted, &r));
  const bool has_share = KeepsShare(r);
  const bool located = !st.ColumnIsNull(5) && !st.ColumnIsNull(6) && !st.ColumnIsNull(7);
  if (!located && (!st.ColumnIsNull(5) || !st.ColumnIsNull(6) || !st.ColumnIsNull(7))) {
    return CorruptStore("share location (partly set)");
  }
  if (has_share != located) return CorruptStore("share location (set for the wrong state)");
  loc->reset();
  if (has_share) *loc = ShareLocation{st.ColumnInt64(5), st.ColumnInt64(6), st.ColumnInt64(7)};
  return r;
}

}  // namespace

absl::StatusOr<ReportRecord> SegmentReportStore::ReadReportLocked(const Statement& st) {
  std::optional<ShareLocation> loc;
  TANDEM_ASSIGN_OR_RETURN(ReportRecord r, DecodeReportRow(st, &loc));
  if (loc.has_value()) {
    bool owner_checks = false;
    TANDEM_ASSIGN_OR_RETURN(r.share, files_->Read(*loc, ShareTag(r.share_digest), &owner_checks));
    if (owner_checks) TANDEM_RETURN_IF_ERROR(CheckStoredShare(r));
  }
  return r;
}

absl::StatusOr<ReportRecord> SegmentReportStore::GetReportLocked(absl::string_view report_id) {
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st,
                          db_->PrepareCached(absl::StrCat("SELECT ", kReportColumns,
                                                          " FROM reports WHERE report_id = ?1")));
  TANDEM_RETURN_IF_ERROR(st->BindBlob(1, report_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
  if (!row) return absl::NotFoundError("report not found");
  return ReadReportLocked(*st);
}

void SegmentReportStore::DiscardLocked() {
  files_->Discard();
  accumulators_->Discard();
}

absl::Status SegmentReportStore::CommitWithSharesLocked(Transaction& tx) {
  // The ack point: records durable first, then the rows that name them.
  TANDEM_RETURN_IF_ERROR(files_->Flush());
  TANDEM_RETURN_IF_ERROR(accumulators_->Flush());
  return tx.Commit();
}

absl::Status SegmentReportStore::WriteAccumulatorLocked(int64_t round_id, absl::string_view bytes,
                                                        int64_t newly_counted) {
  TANDEM_ASSIGN_OR_RETURN(const ShareLocation loc, accumulators_->Add(bytes, RoundTag(round_id)));
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement up,
      db_->PrepareCached(
          "INSERT INTO accumulators VALUES (?1, ?2, ?3, ?4, ?5, 1) ON CONFLICT(round_id) "
          "DO UPDATE SET seg = excluded.seg, off = excluded.off, len = excluded.len, "
          "report_count = report_count + excluded.report_count, version = version + 1"));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(1, round_id));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(2, loc.segment));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(3, loc.offset));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(4, loc.length));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(5, newly_counted));
  return up->StepDone();
}

absl::Status SegmentReportStore::PutPending(int64_t round_id, absl::string_view report_id,
                                            absl::string_view share) {
  const PendingReport one{std::string(report_id), std::string(share), {}};
  TANDEM_ASSIGN_OR_RETURN(std::vector<absl::Status> out,
                          PutPendingBatch(round_id, absl::MakeConstSpan(&one, 1)));
  return out[0];
}

absl::StatusOr<std::vector<absl::Status>> SegmentReportStore::PutPendingBatch(
    int64_t round_id, absl::Span<const PendingReport> reports) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  // Uploads write one batch at a time (the only writers of new rows), so
  // the duplicate checks below still hold when the rows are inserted.
  absl::MutexLock upload_lock(&upload_mu_);
  // Digests before the lock (SHA-256 of ~134 KB each at D = 2^20), where the
  // uploads have not computed them already.
  std::vector<std::string> digests;
  digests.reserve(reports.size());
  for (const PendingReport& r : reports) digests.push_back(DigestOf(r));
  std::vector<absl::Status> out;
  std::vector<NewReport> rows;
  SegmentWrite write;
  {
    absl::MutexLock lock(&mu_);
    absl::Cleanup discard = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { DiscardLocked(); };
    // The checks in one read transaction: one WAL snapshot and one pair of
    // lock calls for the batch instead of one per report, and the pages the
    // lookups share are read once.
    TANDEM_ASSIGN_OR_RETURN(Transaction checks,
                            Transaction::Begin(db_.get(), sqlite::TransactionMode::kDeferred));
    TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
    absl::flat_hash_map<std::string, std::string> batch_digests;  // new ids of this batch
    out.reserve(reports.size());
    for (size_t i = 0; i < reports.size(); ++i) {
      absl::Status s = CheckNewLocked(round_id, reports[i].report_id, reports[i].share,
                                      std::move(digests[i]), &batch_digests, &rows);
      // Per-report refusals are answers; anything else aborts the batch.
      if (!s.ok() && !absl::IsAlreadyExists(s) && !absl::IsInvalidArgument(s)) return s;
      out.push_back(std::move(s));
    }
    TANDEM_RETURN_IF_ERROR(checks.Commit());
    TANDEM_ASSIGN_OR_RETURN(write, files_->BeginFlush());
    std::move(discard).Cancel();
  }
  // The shares reach the disk with no lock held: verification's state reads
  // and commits go on meanwhile. Only then are the rows naming them
  // committed (the ack point), in a short transaction.
  const absl::Status written = write.Run();
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(files_->EndFlush(write, written));
  if (rows.empty()) return out;
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  // Closed meanwhile: nothing is indexed (the records are dead space).
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement ins,
      db_->PrepareCached("INSERT INTO reports VALUES (?1, ?2, 0, 0, ?3, ?4, ?5, ?6)"));
  for (const NewReport& row : rows) {
    TANDEM_RETURN_IF_ERROR(ins->Reset());
    TANDEM_RETURN_IF_ERROR(ins->BindBlob(1, row.report_id));
    TANDEM_RETURN_IF_ERROR(ins->BindInt64(2, round_id));
    TANDEM_RETURN_IF_ERROR(ins->BindBlob(3, row.digest));
    TANDEM_RETURN_IF_ERROR(ins->BindInt64(4, row.loc.segment));
    TANDEM_RETURN_IF_ERROR(ins->BindInt64(5, row.loc.offset));
    TANDEM_RETURN_IF_ERROR(ins->BindInt64(6, row.loc.length));
    TANDEM_RETURN_IF_ERROR(ins->StepDone());
  }
  TANDEM_RETURN_IF_ERROR(tx.Commit());
  return out;
}

absl::Status SegmentReportStore::CheckNewLocked(
    int64_t round_id, absl::string_view report_id, absl::string_view share, std::string digest,
    absl::flat_hash_map<std::string, std::string>* batch_digests, std::vector<NewReport>* rows) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  TANDEM_RETURN_IF_ERROR(ValidateShare(share));
  // The idempotency check needs the digest only, not the stored share.
  const auto same = [&](int64_t stored_round, absl::string_view stored_digest) {
    return stored_round == round_id && stored_digest == digest
               ? absl::OkStatus()
               : absl::AlreadyExistsError("report id already used (replay or conflicting content)");
  };
  if (auto it = batch_digests->find(report_id); it != batch_digests->end()) {
    return same(round_id, it->second);  // twice in this batch
  }
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement get,
      db_->PrepareCached("SELECT round_id, share_digest FROM reports WHERE report_id = ?1"));
  TANDEM_RETURN_IF_ERROR(get->BindBlob(1, report_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, get->Step());
  if (row) return same(get->ColumnInt64(0), get->ColumnBlob(1));
  // Checked by its digest on every read (CheckStoredShare), not by a CRC.
  TANDEM_ASSIGN_OR_RETURN(const ShareLocation loc,
                          files_->Add(share, ShareTag(digest), RecordCheck::kOwnerDigest));
  batch_digests->emplace(report_id, digest);
  rows->push_back(NewReport{std::string(report_id), std::move(digest), loc});
  return absl::OkStatus();
}

absl::Status SegmentReportStore::Transition(absl::string_view report_id, ReportState to) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  {
    TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
    TANDEM_ASSIGN_OR_RETURN(
        CachedStatement get,
        db_->PrepareCached("SELECT round_id, state FROM reports WHERE report_id = ?1"));
    TANDEM_RETURN_IF_ERROR(get->BindBlob(1, report_id));
    TANDEM_ASSIGN_OR_RETURN(const bool row, get->Step());
    if (!row) return absl::NotFoundError("report not found");
    const int64_t round_id = get->ColumnInt64(0);
    const int64_t state = get->ColumnInt64(1);
    if (round_id < 0 || state < 0 || state > 2) return CorruptStore("report round/state");
    TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
    if (static_cast<ReportState>(state) == to) return absl::OkStatus();
    if (static_cast<ReportState>(state) != ReportState::kPending) {
      return absl::FailedPreconditionError("report is no longer pending: transition refused");
    }
    // Rejected reports drop their share; accepted ones keep it until counted.
    TANDEM_ASSIGN_OR_RETURN(
        CachedStatement up,
        db_->PrepareCached(to == ReportState::kRejected
                               ? absl::StrCat("UPDATE reports SET state = ?2, ", kDropShare,
                                              " WHERE report_id = ?1")
                               : "UPDATE reports SET state = ?2 WHERE report_id = ?1"));
    TANDEM_RETURN_IF_ERROR(up->BindBlob(1, report_id));
    TANDEM_RETURN_IF_ERROR(up->BindInt64(2, static_cast<int64_t>(to)));
    TANDEM_RETURN_IF_ERROR(up->StepDone());
    TANDEM_RETURN_IF_ERROR(tx.Commit());
  }
  if (to == ReportState::kRejected) ReclaimLocked();
  return absl::OkStatus();
}

void SegmentReportStore::ReclaimLocked() {
  // Only after the commit that dropped the last location: a crash before
  // the unlink leaves an unnamed segment, deleted by the next Open.
  for (const auto& [files, table] :
       {std::pair(files_.get(), "reports"), std::pair(accumulators_.get(), "accumulators")}) {
    for (const int64_t segment : files->InactiveSegments()) {
      absl::StatusOr<CachedStatement> st =
          db_->PrepareCached(absl::StrCat("SELECT 1 FROM ", table, " WHERE seg = ?1 LIMIT 1"));
      if (!st.ok() || !(*st)->BindInt64(1, segment).ok()) return;
      absl::StatusOr<bool> row = (*st)->Step();
      if (!row.ok()) return;
      if (!*row) files->Remove(segment).IgnoreError();  // A leftover goes at the next Open.
    }
  }
}

absl::Status SegmentReportStore::MarkAccepted(absl::string_view report_id) {
  return Transition(report_id, ReportState::kAccepted);
}
absl::Status SegmentReportStore::MarkRejected(absl::string_view report_id) {
  return Transition(report_id, ReportState::kRejected);
}

absl::StatusOr<ReportRecord> SegmentReportStore::GetReport(absl::string_view report_id) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  return GetReportLocked(report_id);
}

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> SegmentReportStore::GetReportStates(
    absl::Span<const std::string> report_ids) {
  for (const std::string& id : report_ids) TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
  absl::MutexLock lock(&reader_mu_);
  // One snapshot for all the ids (and one pair of WAL lock calls).
  TANDEM_ASSIGN_OR_RETURN(Transaction read,
                          Transaction::Begin(reader_.get(), sqlite::TransactionMode::kDeferred));
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st,
                          reader_->PrepareCached(absl::StrCat(
                              "SELECT ", kReportColumns, " FROM reports WHERE report_id = ?1")));
  absl::flat_hash_map<std::string, ReportRecord> out;
  std::optional<ShareLocation> loc;
  for (const std::string& id : report_ids) {
    TANDEM_RETURN_IF_ERROR(st->Reset());
    TANDEM_RETURN_IF_ERROR(st->BindBlob(1, id));
    TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
    if (!row) continue;
    TANDEM_ASSIGN_OR_RETURN(ReportRecord r, DecodeReportRow(*st, &loc));
    out.insert_or_assign(id, std::move(r));
  }
  TANDEM_RETURN_IF_ERROR(read.Commit());
  return out;
}

absl::StatusOr<std::vector<ReportRecord>> SegmentReportStore::ListReportStates(
    int64_t round_id, ReportFilter filter) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&reader_mu_);
  TANDEM_RETURN_IF_ERROR(ReadRoundRow(*reader_, round_id).status());
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st, reader_->PrepareCached(ListSql(filter)));
  std::optional<ShareLocation> loc;
  return CollectRows(*st, round_id,
                     [&loc](const Statement& row) { return DecodeReportRow(row, &loc); });
}

absl::StatusOr<std::vector<ReportRecord>> SegmentReportStore::ListReports(int64_t round_id,
                                                                          ReportFilter filter) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(GetRoundLocked(round_id).status());
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st, db_->PrepareCached(ListSql(filter)));
  return CollectRows(*st, round_id, [this](const Statement& row) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ReadReportLocked(row);  // mu_ is held by the caller
  });
}

absl::Status SegmentReportStore::SaveAccumulator(int64_t round_id, absl::string_view bytes,
                                                 absl::Span<const std::string> newly_counted) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, newly_counted));
  absl::MutexLock lock(&mu_);
  return CountLocked(round_id, bytes, newly_counted, /*release=*/false);
}

absl::Status SegmentReportStore::CountAndRelease(int64_t round_id, absl::string_view counted,
                                                 absl::Span<const std::string> newly_counted,
                                                 absl::string_view released) {
  TANDEM_RETURN_IF_ERROR(ValidateCountAndRelease(round_id, counted, newly_counted, released));
  absl::MutexLock lock(&mu_);
  return CountLocked(round_id, released, newly_counted, /*release=*/true);
}

absl::Status SegmentReportStore::CountLocked(int64_t round_id, absl::string_view bytes,
                                             absl::Span<const std::string> newly_counted,
                                             bool release) {
  absl::Cleanup discard = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { DiscardLocked(); };
  // One transaction (one fsync of each file).
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kCount, kDropShare, round_id,
                                         newly_counted, "SaveAccumulator"));
  TANDEM_RETURN_IF_ERROR(
      WriteAccumulatorLocked(round_id, bytes, static_cast<int64_t>(newly_counted.size())));
  if (release) TANDEM_RETURN_IF_ERROR(MarkRoundReleasedRow(*db_, round_id));
  TANDEM_RETURN_IF_ERROR(CommitWithSharesLocked(tx));
  ReclaimLocked();
  return absl::OkStatus();
}

absl::Status SegmentReportStore::CommitBatch(int64_t round_id, absl::string_view bytes,
                                             absl::Span<const std::string> accept_and_count,
                                             absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch(bytes, accept_and_count, reject));
  absl::MutexLock lock(&mu_);
  absl::Cleanup discard = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { DiscardLocked(); };
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  // Any failure returns before Commit, so the transaction rolls back whole.
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kAcceptAndCount, kDropShare,
                                         round_id, accept_and_count, "CommitBatch"));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kReject, kDropShare, round_id,
                                         reject, "CommitBatch"));
  if (!accept_and_count.empty()) {
    TANDEM_RETURN_IF_ERROR(
        WriteAccumulatorLocked(round_id, bytes, static_cast<int64_t>(accept_and_count.size())));
  }
  TANDEM_RETURN_IF_ERROR(CommitWithSharesLocked(tx));
  ReclaimLocked();
  return absl::OkStatus();
}

absl::Status SegmentReportStore::CommitDecisions(int64_t round_id,
                                                 absl::Span<const std::string> accept,
                                                 absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch("", accept, reject));
  absl::MutexLock lock(&mu_);
  absl::Cleanup discard = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { DiscardLocked(); };
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  // Any failure returns before Commit, so the transaction rolls back whole.
  // Accepted reports keep their share (uncounted until the next checkpoint).
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kAccept, kDropShare, round_id,
                                         accept, "CommitDecisions"));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kReject, kDropShare, round_id,
                                         reject, "CommitDecisions"));
  TANDEM_RETURN_IF_ERROR(CommitWithSharesLocked(tx));
  ReclaimLocked();
  return absl::OkStatus();
}

absl::StatusOr<AccumulatorSnapshot> SegmentReportStore::LoadAccumulator(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx,
                          Transaction::Begin(db_.get(), sqlite::TransactionMode::kDeferred));
  TANDEM_RETURN_IF_ERROR(GetRoundLocked(round_id).status());
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement st,
      db_->PrepareCached("SELECT seg, off, len, report_count, version FROM accumulators "
                         "WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(st->BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
  AccumulatorSnapshot snap{round_id, "", 0, 0};
  if (row) {
    snap.report_count = st->ColumnInt64(3);
    snap.version = st->ColumnInt64(4);
    if (snap.report_count < 0 || snap.version < 1) return CorruptStore("accumulator counters");
    const ShareLocation loc{st->ColumnInt64(0), st->ColumnInt64(1), st->ColumnInt64(2)};
    TANDEM_ASSIGN_OR_RETURN(snap.bytes, accumulators_->Read(loc, RoundTag(round_id)));
  }
  // Cross-check against the report states written in the same transactions.
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement count,
      db_->PrepareCached("SELECT count(*) FROM reports WHERE round_id = ?1 AND counted = 1"));
  TANDEM_RETURN_IF_ERROR(count->BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool count_row, count->Step());
  if (!count_row || count->ColumnInt64(0) != snap.report_count) {
    return CorruptStore("accumulator (report count disagrees with counted reports)");
  }
  return snap;
}

}  // namespace tandem::aggregator
