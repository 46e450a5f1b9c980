#include "aggregator/store/sqlite_report_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/store/sqlite_rounds.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

using sqlite::CachedStatement;
using sqlite::Statement;
using sqlite::Transaction;

constexpr absl::string_view kSchemaV1 = R"sql(
CREATE TABLE IF NOT EXISTS rounds (
  round_id   INTEGER PRIMARY KEY,
  parameters BLOB NOT NULL,
  state      INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
  report_id    BLOB PRIMARY KEY,
  round_id     INTEGER NOT NULL REFERENCES rounds(round_id),
  state        INTEGER NOT NULL,
  counted      INTEGER NOT NULL,
  share_digest BLOB NOT NULL,
  share        BLOB);
CREATE INDEX IF NOT EXISTS reports_by_round ON reports(round_id, state, counted);
CREATE TABLE IF NOT EXISTS accumulators (
  round_id     INTEGER PRIMARY KEY REFERENCES rounds(round_id),
  bytes        BLOB NOT NULL,
  report_count INTEGER NOT NULL,
  version      INTEGER NOT NULL);
)sql";

// Version 2: the rounds' secrets (the helper's FLP query seed).
constexpr absl::string_view kSchemaV2 = R"sql(
CREATE TABLE IF NOT EXISTS round_secrets (
  round_id INTEGER PRIMARY KEY REFERENCES rounds(round_id),
  secret   BLOB NOT NULL);
)sql";

constexpr absl::string_view kReportColumns =
    "report_id, round_id, state, counted, share_digest, share";
constexpr absl::string_view kStateColumns = "report_id, round_id, state, counted, share_digest";
// The SET clause that forgets a report's share (ApplyTransition).
constexpr absl::string_view kDropShare = "share = NULL";

// The round's accumulator row: `bytes` replaces the snapshot, `newly_counted`
// is added to its report count, the version goes up by one.
absl::Status WriteAccumulatorRow(sqlite::Database& db, int64_t round_id, absl::string_view bytes,
                                 int64_t newly_counted) {
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::CachedStatement up,
      db.PrepareCached("INSERT INTO accumulators VALUES (?1, ?2, ?3, 1) ON CONFLICT(round_id) DO "
                       "UPDATE SET bytes = excluded.bytes, report_count = report_count + "
                       "excluded.report_count, version = version + 1"));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(1, round_id));
  TANDEM_RETURN_IF_ERROR(up->BindBlob(2, bytes));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(3, newly_counted));
  return up->StepDone();
}

// Decodes and validates one reports row (columns in kReportColumns order).
// One reports row: kReportColumns, or kStateColumns (no share) when
// `with_share` is false.
absl::StatusOr<ReportRecord> ReadReport(const Statement& st, bool with_share) {
  ReportRecord r;
  r.report_id = st.ColumnBlob(0);
  r.round_id = st.ColumnInt64(1);
  const int64_t state = st.ColumnInt64(2);
  const int64_t counted = st.ColumnInt64(3);
  r.share_digest = st.ColumnBlob(4);
  if (with_share) r.share = st.ColumnBlob(5);
  TANDEM_RETURN_IF_ERROR(CheckStoredReportRow(state, counted, &r));
  if (with_share) TANDEM_RETURN_IF_ERROR(CheckStoredShare(r));
  return r;
}

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

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteReportStore>> SqliteReportStore::Open(
    const std::string& path, const sqlite::DatabaseOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path, options));
  std::unique_ptr<SqliteReportStore> store(new SqliteReportStore(std::move(db)));
  TANDEM_RETURN_IF_ERROR(store->Migrate());
  if (options.wal) {
    TANDEM_ASSIGN_OR_RETURN(auto db, sqlite::Database::OpenQueryOnly(path, options));
    absl::MutexLock lock(&store->reader_mu_);
    store->reader_ = std::move(db);
  }
  return store;
}

absl::Status SqliteReportStore::Migrate() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(db_->Exec(
      "CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"));
  // Run once at open: compiled for this call only, not kept.
  TANDEM_ASSIGN_OR_RETURN(
      Statement get,
      db_->Prepare("SELECT version FROM schema_version WHERE component = 'report_store'"));
  TANDEM_ASSIGN_OR_RETURN(const bool has_row, get.Step());
  if (has_row) {
    const int64_t version = get.ColumnInt64(0);
    if (version < 1) return CorruptStore("schema_version");
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "report store: schema version ", version, " is newer than this binary's ", kSchemaVersion));
    }
    if (version < 2) {  // v1 -> v2: add the round secrets
      TANDEM_RETURN_IF_ERROR(db_->Exec(kSchemaV2));
      TANDEM_RETURN_IF_ERROR(db_->Exec(absl::StrCat(
          "UPDATE schema_version SET version = ", kSchemaVersion,
          " WHERE component = 'report_store'")));
    }
  } else {
    TANDEM_RETURN_IF_ERROR(db_->Exec(kSchemaV1));
    TANDEM_RETURN_IF_ERROR(db_->Exec(kSchemaV2));
    TANDEM_RETURN_IF_ERROR(db_->Exec(absl::StrCat(
        "INSERT INTO schema_version VALUES ('report_store', ", kSchemaVersion, ")")));
  }
  return tx.Commit();
}

absl::StatusOr<RoundRecord> SqliteReportStore::GetRoundLocked(int64_t round_id) {
  return ReadRoundRow(*db_, round_id);
}

absl::StatusOr<std::vector<RoundRecord>> SqliteReportStore::ListRounds() {
  absl::MutexLock lock(&mu_);
  return ReadAllRounds(*db_);
}

absl::Status SqliteReportStore::RequireOpenLocked(int64_t round_id) {
  return RequireOpenRound(*db_, round_id);
}

absl::Status SqliteReportStore::OpenRound(int64_t round_id, absl::string_view parameters) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateParameters(parameters));
  absl::MutexLock lock(&mu_);
  return OpenRoundRow(*db_, round_id, parameters);
}

absl::Status SqliteReportStore::CloseRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return CloseRoundRow(*db_, round_id);
}

absl::Status SqliteReportStore::ReleaseRound(int64_t round_id, absl::string_view bytes) {
  return CountAndRelease(round_id, bytes, {}, bytes);
}

absl::Status SqliteReportStore::CountAndRelease(int64_t round_id, absl::string_view counted,
                                                absl::Span<const std::string> newly_counted,
                                                absl::string_view released) {
  TANDEM_RETURN_IF_ERROR(ValidateCountAndRelease(round_id, counted, newly_counted, released));
  absl::MutexLock lock(&mu_);
  return CountLocked(round_id, released, newly_counted, /*release=*/true);
}

absl::Status SqliteReportStore::CountLocked(int64_t round_id, absl::string_view bytes,
                                            absl::Span<const std::string> newly_counted,
                                            bool release) {
  // One transaction (one fsync).
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kCount, kDropShare, round_id,
                                         newly_counted, "SaveAccumulator"));
  TANDEM_RETURN_IF_ERROR(
      WriteAccumulatorRow(*db_, round_id, bytes, static_cast<int64_t>(newly_counted.size())));
  if (release) TANDEM_RETURN_IF_ERROR(MarkRoundReleasedRow(*db_, round_id));
  return tx.Commit();
}

absl::StatusOr<ReportCounts> SqliteReportStore::CountReports(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return CountReportRows(*db_, round_id);
}

absl::StatusOr<std::string> SqliteReportStore::BindRoundSecret(int64_t round_id, absl::string_view secret) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateRoundSecret(secret));
  absl::MutexLock lock(&mu_);
  return BindRoundSecretRow(*db_, round_id, secret);
}

absl::StatusOr<RoundRecord> SqliteReportStore::GetRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return GetRoundLocked(round_id);
}

absl::StatusOr<ReportRecord> SqliteReportStore::GetReportLocked(absl::string_view report_id) {
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st,
                          db_->PrepareCached(absl::StrCat("SELECT ", kReportColumns,
                                                          " FROM reports WHERE report_id = ?1")));
  TANDEM_RETURN_IF_ERROR(st->BindBlob(1, report_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
  if (!row) return absl::NotFoundError("report not found");
  return ReadReport(*st, /*with_share=*/true);
}

absl::Status SqliteReportStore::PutPending(int64_t round_id, absl::string_view report_id,
                                           absl::string_view share) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  TANDEM_RETURN_IF_ERROR(PutPendingLocked(round_id, report_id, share, ShareDigest(share)));
  return tx.Commit();
}

absl::StatusOr<std::vector<absl::Status>> SqliteReportStore::PutPendingBatch(
    int64_t round_id, absl::Span<const PendingReport> reports) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  std::vector<std::string> digests;  // before the lock
  for (const PendingReport& r : reports) digests.push_back(DigestOf(r));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  std::vector<absl::Status> out;
  out.reserve(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    absl::Status s = PutPendingLocked(round_id, reports[i].report_id, reports[i].share, digests[i]);
    // Per-report refusals are answers; anything else aborts the batch.
    if (!s.ok() && !absl::IsAlreadyExists(s) && !absl::IsInvalidArgument(s)) return s;
    out.push_back(std::move(s));
  }
  TANDEM_RETURN_IF_ERROR(tx.Commit());
  return out;
}

absl::Status SqliteReportStore::PutPendingLocked(int64_t round_id, absl::string_view report_id,
                                                 absl::string_view share,
                                                 absl::string_view digest) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  TANDEM_RETURN_IF_ERROR(ValidateShare(share));
  absl::StatusOr<ReportRecord> existing = GetReportLocked(report_id);
  if (existing.ok()) {
    if (existing->round_id == round_id && existing->share_digest == digest) return absl::OkStatus();
    return absl::AlreadyExistsError("report id already used (replay or conflicting content)");
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  TANDEM_ASSIGN_OR_RETURN(CachedStatement ins,
                          db_->PrepareCached("INSERT INTO reports VALUES (?1, ?2, 0, 0, ?3, ?4)"));
  TANDEM_RETURN_IF_ERROR(ins->BindBlob(1, report_id));
  TANDEM_RETURN_IF_ERROR(ins->BindInt64(2, round_id));
  TANDEM_RETURN_IF_ERROR(ins->BindBlob(3, digest));
  TANDEM_RETURN_IF_ERROR(ins->BindBlob(4, share));
  return ins->StepDone();
}

absl::Status SqliteReportStore::Transition(absl::string_view report_id, ReportState to) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_ASSIGN_OR_RETURN(const ReportRecord r, GetReportLocked(report_id));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(r.round_id));
  if (r.state == to) return absl::OkStatus();
  if (r.state != ReportState::kPending) {
    return absl::FailedPreconditionError("report is no longer pending: transition refused");
  }
  // Rejected reports drop their share; accepted ones keep it until counted.
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement up,
      db_->PrepareCached(to == ReportState::kRejected
                             ? "UPDATE reports SET state = ?2, share = NULL WHERE report_id = ?1"
                             : "UPDATE reports SET state = ?2 WHERE report_id = ?1"));
  TANDEM_RETURN_IF_ERROR(up->BindBlob(1, report_id));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(2, static_cast<int64_t>(to)));
  TANDEM_RETURN_IF_ERROR(up->StepDone());
  return tx.Commit();
}

absl::Status SqliteReportStore::MarkAccepted(absl::string_view report_id) {
  return Transition(report_id, ReportState::kAccepted);
}
absl::Status SqliteReportStore::MarkRejected(absl::string_view report_id) {
  return Transition(report_id, ReportState::kRejected);
}

absl::StatusOr<ReportRecord> SqliteReportStore::GetReport(absl::string_view report_id) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  return GetReportLocked(report_id);
}

absl::StatusOr<std::vector<ReportRecord>> SqliteReportStore::ListReports(int64_t round_id,
                                                                         ReportFilter filter) {
  return ListReportsImpl(round_id, filter, /*with_share=*/true);
}

absl::StatusOr<std::vector<ReportRecord>> SqliteReportStore::ListReportStates(int64_t round_id,
                                                                              ReportFilter filter) {
  return ListReportsImpl(round_id, filter, /*with_share=*/false);
}

namespace {

// The rows of `report_ids` that exist, read through `db` (no share).
absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> ReadStates(
    sqlite::Database& db, absl::Span<const std::string> report_ids) {
  // One snapshot (and one pair of WAL lock calls) for all the ids. Callers
  // hold the connection's mutex and have no transaction open on it.
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction read,
                          sqlite::Transaction::Begin(&db, sqlite::TransactionMode::kDeferred));
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st,
                          db.PrepareCached(absl::StrCat("SELECT ", kStateColumns,
                                                        " FROM reports WHERE report_id = ?1")));
  absl::flat_hash_map<std::string, ReportRecord> out;
  for (const std::string& id : report_ids) {
    TANDEM_RETURN_IF_ERROR(st->Reset());
    TANDEM_RETURN_IF_ERROR(st->BindBlob(1, id));
    TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
    if (!row) continue;
    TANDEM_ASSIGN_OR_RETURN(ReportRecord r, ReadReport(*st, /*with_share=*/false));
    out.insert_or_assign(id, std::move(r));
  }
  TANDEM_RETURN_IF_ERROR(read.Commit());
  return out;
}

}  // namespace

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> SqliteReportStore::GetReportStates(
    absl::Span<const std::string> report_ids) {
  for (const std::string& id : report_ids) TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
  {
    absl::MutexLock lock(&reader_mu_);
    if (reader_ != nullptr) return ReadStates(*reader_, report_ids);
  }
  absl::MutexLock lock(&mu_);
  return ReadStates(*db_, report_ids);
}

absl::StatusOr<std::vector<ReportRecord>> SqliteReportStore::ListReportsImpl(int64_t round_id,
                                                                             ReportFilter filter,
                                                                             bool with_share) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(GetRoundLocked(round_id).status());
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement st,
      db_->PrepareCached(absl::StrCat("SELECT ", with_share ? kReportColumns : kStateColumns,
                                      " FROM reports WHERE round_id = ?1 AND ", FilterSql(filter),
                                      " ORDER BY report_id")));
  TANDEM_RETURN_IF_ERROR(st->BindInt64(1, round_id));
  std::vector<ReportRecord> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
    if (!row) break;
    TANDEM_ASSIGN_OR_RETURN(ReportRecord r, ReadReport(*st, with_share));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status SqliteReportStore::SaveAccumulator(int64_t round_id, absl::string_view bytes,
                                                absl::Span<const std::string> newly_counted) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, newly_counted));
  absl::MutexLock lock(&mu_);
  return CountLocked(round_id, bytes, newly_counted, /*release=*/false);
}

absl::Status SqliteReportStore::CommitBatch(int64_t round_id, absl::string_view bytes,
                                            absl::Span<const std::string> accept_and_count,
                                            absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch(bytes, accept_and_count, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  // Any failure returns before Commit, so the transaction rolls back whole.
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kAcceptAndCount, kDropShare,
                                         round_id, accept_and_count, "CommitBatch"));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kReject, kDropShare, round_id,
                                         reject, "CommitBatch"));
  if (!accept_and_count.empty()) {
    TANDEM_RETURN_IF_ERROR(WriteAccumulatorRow(*db_, round_id, bytes,
                                               static_cast<int64_t>(accept_and_count.size())));
  }
  return tx.Commit();
}

absl::Status SqliteReportStore::CommitDecisions(int64_t round_id,
                                                absl::Span<const std::string> accept,
                                                absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch("", accept, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(RequireOpenLocked(round_id));
  // Any failure returns before Commit, so the transaction rolls back whole.
  // Accepted reports keep their share (uncounted until the next checkpoint).
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kAccept, kDropShare, round_id,
                                         accept, "CommitDecisions"));
  TANDEM_RETURN_IF_ERROR(ApplyTransition(*db_, ReportTransition::kReject, kDropShare, round_id,
                                         reject, "CommitDecisions"));
  return tx.Commit();
}

absl::StatusOr<AccumulatorSnapshot> SqliteReportStore::LoadAccumulator(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get(), sqlite::TransactionMode::kDeferred));
  TANDEM_RETURN_IF_ERROR(GetRoundLocked(round_id).status());
  TANDEM_ASSIGN_OR_RETURN(
      CachedStatement st,
      db_->PrepareCached(
          "SELECT bytes, report_count, version FROM accumulators WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(st->BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
  AccumulatorSnapshot snap{round_id, "", 0, 0};
  if (row) {
    snap.bytes = st->ColumnBlob(0);
    snap.report_count = st->ColumnInt64(1);
    snap.version = st->ColumnInt64(2);
    if (snap.report_count < 0 || snap.version < 1) return CorruptStore("accumulator counters");
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
