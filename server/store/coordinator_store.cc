#include "server/store/coordinator_store.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::server {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoint (
  id INTEGER PRIMARY KEY CHECK (id = 1), blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
  aggregation_round INTEGER PRIMARY KEY,
  model_version INTEGER NOT NULL,
  opened_ms INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'released', 'abandoned')),
  summary BLOB);
CREATE TABLE IF NOT EXISTS assignments (
  aggregation_round INTEGER NOT NULL,
  client_id TEXT NOT NULL,
  report_id BLOB,
  bytes_up INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (aggregation_round, client_id));
)sql";

template <typename Message>
absl::StatusOr<Message> ParseBlob(const std::string& blob, const char* what) {
  Message m;
  if (!m.ParseFromString(blob)) {
    return absl::DataLossError(absl::StrCat("stored ", what, " does not parse"));
  }
  return m;
}

// A row of (client_id, report_id, bytes_up) from `assignments`.
AssignmentRecord AssignmentFromRow(const sqlite::Statement& st) {
  AssignmentRecord a;
  a.client_id = st.ColumnText(0);
  a.done = !st.ColumnIsNull(1);
  a.report_id = st.ColumnBlob(1);
  a.bytes_up = static_cast<uint64_t>(st.ColumnInt64(2));
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorStore>> CoordinatorStore::Open(const std::string& path) {
  sqlite::DatabaseOptions options;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> db,
                          sqlite::Database::Open(path, options));
  TANDEM_RETURN_IF_ERROR(db->Exec(kSchema));
  return std::unique_ptr<CoordinatorStore>(new CoordinatorStore(std::move(db)));
}

absl::StatusOr<std::optional<std::string>> CoordinatorStore::GetMeta(const std::string& key) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st, db_->Prepare("SELECT value FROM meta WHERE key=?1"));
  TANDEM_RETURN_IF_ERROR(st.BindText(1, key));
  TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::nullopt;
  return st.ColumnBlob(0);
}

absl::Status CoordinatorStore::PutMeta(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)"));
  TANDEM_RETURN_IF_ERROR(st.BindText(1, key));
  TANDEM_RETURN_IF_ERROR(st.BindBlob(2, value));
  return st.StepDone();
}

absl::StatusOr<std::optional<proto::TaskCheckpoint>> CoordinatorStore::LoadCheckpoint() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("SELECT blob FROM checkpoint WHERE id=1"));
  TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::nullopt;
  TANDEM_ASSIGN_OR_RETURN(proto::TaskCheckpoint c,
                          ParseBlob<proto::TaskCheckpoint>(st.ColumnBlob(0), "checkpoint"));
  return c;
}

absl::StatusOr<std::optional<OpenRoundRecord>> CoordinatorStore::LoadOpenRound() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("SELECT aggregation_round, model_version, opened_ms, deadline_ms FROM rounds "
                   "WHERE state='open'"));
  TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::nullopt;
  OpenRoundRecord r;
  r.aggregation_round = static_cast<uint64_t>(st.ColumnInt64(0));
  r.model_version = static_cast<uint64_t>(st.ColumnInt64(1));
  r.opened_unix_ms = st.ColumnInt64(2);
  r.deadline_unix_ms = st.ColumnInt64(3);
  return r;
}

absl::StatusOr<uint64_t> CoordinatorStore::LastAggregationRound() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("SELECT COALESCE(MAX(aggregation_round), 0) FROM rounds"));
  TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? static_cast<uint64_t>(st.ColumnInt64(0)) : 0;
}

absl::StatusOr<std::vector<AssignmentRecord>> CoordinatorStore::LoadAssignments(
    uint64_t aggregation_round) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("SELECT client_id, report_id, bytes_up FROM assignments "
                   "WHERE aggregation_round=?1 ORDER BY client_id"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(aggregation_round)));
  std::vector<AssignmentRecord> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(AssignmentFromRow(st));
  }
  return out;
}

absl::StatusOr<std::vector<proto::RoundSummary>> CoordinatorStore::LoadHistory() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("SELECT summary FROM rounds WHERE state='released' ORDER BY aggregation_round"));
  std::vector<proto::RoundSummary> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    TANDEM_ASSIGN_OR_RETURN(proto::RoundSummary s,
                            ParseBlob<proto::RoundSummary>(st.ColumnBlob(0), "round summary"));
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status CoordinatorStore::BeginRound(const OpenRoundRecord& round) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_.get()));
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_->Prepare("SELECT COUNT(*), COALESCE(MAX(aggregation_round), 0), "
                   "SUM(state='open') FROM rounds"));
  TANDEM_ASSIGN_OR_RETURN(bool row, q.Step());
  if (row && q.ColumnInt64(2) > 0) return absl::FailedPreconditionError("a round is still open");
  if (row && static_cast<uint64_t>(q.ColumnInt64(1)) >= round.aggregation_round) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation round ", round.aggregation_round, " is not new"));
  }
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("INSERT INTO rounds (aggregation_round, model_version, opened_ms, deadline_ms, "
                   "state) VALUES (?1, ?2, ?3, ?4, 'open')"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(round.aggregation_round)));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(2, static_cast<int64_t>(round.model_version)));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(3, round.opened_unix_ms));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(4, round.deadline_unix_ms));
  TANDEM_RETURN_IF_ERROR(st.StepDone());
  return tx.Commit();
}

absl::StatusOr<std::optional<AssignmentRecord>> CoordinatorStore::FindOpenAssignmentLocked(
    uint64_t aggregation_round, const std::string& client_id) {
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_->Prepare("SELECT a.client_id, a.report_id, a.bytes_up FROM assignments a JOIN rounds r "
                   "USING (aggregation_round) "
                   "WHERE a.aggregation_round=?1 AND a.client_id=?2 AND r.state='open'"));
  TANDEM_RETURN_IF_ERROR(q.BindInt64(1, static_cast<int64_t>(aggregation_round)));
  TANDEM_RETURN_IF_ERROR(q.BindText(2, client_id));
  TANDEM_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::nullopt;
  return AssignmentFromRow(q);
}

absl::Status CoordinatorStore::PutAssignment(uint64_t aggregation_round,
                                             const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("INSERT OR IGNORE INTO assignments (aggregation_round, client_id) "
                   "SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM rounds WHERE aggregation_round=?1 "
                   "AND state='open')"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(aggregation_round)));
  TANDEM_RETURN_IF_ERROR(st.BindText(2, client_id));
  TANDEM_RETURN_IF_ERROR(st.StepDone());
  if (db_->ChangedRows() == 0) {
    // Nothing inserted: already assigned (fine), or the round is not open.
    TANDEM_ASSIGN_OR_RETURN(std::optional<AssignmentRecord> a,
                            FindOpenAssignmentLocked(aggregation_round, client_id));
    if (!a.has_value()) return absl::FailedPreconditionError("round is not open");
  }
  return absl::OkStatus();
}

absl::Status CoordinatorStore::MarkDone(uint64_t aggregation_round, const std::string& client_id,
                                        const std::string& report_id, uint64_t bytes_up) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_.get()));
  TANDEM_ASSIGN_OR_RETURN(std::optional<AssignmentRecord> a,
                          FindOpenAssignmentLocked(aggregation_round, client_id));
  if (!a.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client ", client_id, " has no assignment in open aggregation round ", aggregation_round));
  }
  if (a->done) {
    if (a->report_id == report_id) return absl::OkStatus();
    return absl::AlreadyExistsError("this assignment was already reported with another report id");
  }
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("UPDATE assignments SET report_id=?3, bytes_up=?4 "
                   "WHERE aggregation_round=?1 AND client_id=?2"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(aggregation_round)));
  TANDEM_RETURN_IF_ERROR(st.BindText(2, client_id));
  TANDEM_RETURN_IF_ERROR(st.BindBlob(3, report_id));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(4, static_cast<int64_t>(bytes_up)));
  TANDEM_RETURN_IF_ERROR(st.StepDone());
  return tx.Commit();
}

absl::Status CoordinatorStore::CloseRound(uint64_t aggregation_round, const char* state,
                                          const proto::TaskCheckpoint& checkpoint,
                                          const proto::RoundSummary* summary) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_.get()));
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("UPDATE rounds SET state=?2, summary=?3 WHERE aggregation_round=?1 "
                   "AND state='open'"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(aggregation_round)));
  TANDEM_RETURN_IF_ERROR(st.BindText(2, state));
  if (summary != nullptr) {
    TANDEM_RETURN_IF_ERROR(st.BindBlob(3, summary->SerializeAsString()));
  } else {
    TANDEM_RETURN_IF_ERROR(st.BindNull(3));
  }
  TANDEM_RETURN_IF_ERROR(st.StepDone());
  if (db_->ChangedRows() != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("aggregation round ", aggregation_round, " is not open"));
  }
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement cp,
      db_->Prepare("INSERT OR REPLACE INTO checkpoint (id, blob) VALUES (1, ?1)"));
  TANDEM_RETURN_IF_ERROR(cp.BindBlob(1, checkpoint.SerializeAsString()));
  TANDEM_RETURN_IF_ERROR(cp.StepDone());
  return tx.Commit();
}

absl::Status CoordinatorStore::FinishRound(uint64_t aggregation_round,
                                           const proto::TaskCheckpoint& checkpoint,
                                           const proto::RoundSummary& summary) {
  return CloseRound(aggregation_round, "released", checkpoint, &summary);
}

absl::Status CoordinatorStore::AbandonRound(uint64_t aggregation_round,
                                            const proto::TaskCheckpoint& checkpoint) {
  return CloseRound(aggregation_round, "abandoned", checkpoint, nullptr);
}

}  // namespace tandem::server
