#include "aggregator/store/sqlite_rounds.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

absl::StatusOr<RoundRecord> ReadRoundRow(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::CachedStatement st,
      db.PrepareCached("SELECT parameters, state FROM rounds WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(st->BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
  if (!row) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  RoundRecord r;
  r.round_id = round_id;
  r.parameters = st->ColumnBlob(0);
  const int64_t state = st->ColumnInt64(1);
  if (state < 0 || state > 2) return CorruptStore("round state");
  if (r.parameters.size() > kMaxParametersBytes) return CorruptStore("round parameters");
  r.state = static_cast<RoundState>(state);
  return r;
}

absl::StatusOr<std::vector<RoundRecord>> ReadAllRounds(sqlite::Database& db) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::CachedStatement st,
                          db.PrepareCached("SELECT round_id FROM rounds ORDER BY round_id"));
  std::vector<int64_t> ids;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
    if (!row) break;
    ids.push_back(st->ColumnInt64(0));
  }
  std::vector<RoundRecord> out;
  for (int64_t id : ids) {
    if (!ValidateRoundId(id).ok()) return CorruptStore("round id");
    TANDEM_ASSIGN_OR_RETURN(RoundRecord r, ReadRoundRow(db, id));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status RequireOpenRound(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord r, ReadRoundRow(db, round_id));
  if (r.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return absl::OkStatus();
}

absl::Status OpenRoundRow(sqlite::Database& db, int64_t round_id, absl::string_view parameters) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(&db));
  absl::StatusOr<RoundRecord> existing = ReadRoundRow(db, round_id);
  if (existing.ok()) {
    if (existing->parameters != parameters) {
      return absl::AlreadyExistsError(
          absl::StrCat("round ", round_id, " exists with other parameters"));
    }
    if (existing->state != RoundState::kOpen) {
      return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
    }
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  TANDEM_ASSIGN_OR_RETURN(sqlite::CachedStatement ins,
                          db.PrepareCached("INSERT INTO rounds VALUES (?1, ?2, 0)"));
  TANDEM_RETURN_IF_ERROR(ins->BindInt64(1, round_id));
  TANDEM_RETURN_IF_ERROR(ins->BindBlob(2, parameters));
  TANDEM_RETURN_IF_ERROR(ins->StepDone());
  return tx.Commit();
}

absl::Status CloseRoundRow(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(&db));
  TANDEM_RETURN_IF_ERROR(ReadRoundRow(db, round_id).status());
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::CachedStatement up,
      db.PrepareCached("UPDATE rounds SET state = 1 WHERE round_id = ?1 AND state = 0"));
  TANDEM_RETURN_IF_ERROR(up->BindInt64(1, round_id));
  TANDEM_RETURN_IF_ERROR(up->StepDone());
  return tx.Commit();
}

absl::Status MarkRoundReleasedRow(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::CachedStatement close,
                          db.PrepareCached("UPDATE rounds SET state = 2 WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(close->BindInt64(1, round_id));
  return close->StepDone();
}

absl::StatusOr<std::string> BindRoundSecretRow(sqlite::Database& db, int64_t round_id,
                                               absl::string_view secret) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(&db));
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord round, ReadRoundRow(db, round_id));
  TANDEM_ASSIGN_OR_RETURN(sqlite::CachedStatement get,
                          db.PrepareCached("SELECT secret FROM round_secrets WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(get->BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, get->Step());
  if (row) {
    std::string stored = get->ColumnBlob(0);
    if (!ValidateRoundSecret(stored).ok()) return CorruptStore("round secret");
    return stored;
  }
  if (round.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  TANDEM_ASSIGN_OR_RETURN(sqlite::CachedStatement ins,
                          db.PrepareCached("INSERT INTO round_secrets VALUES (?1, ?2)"));
  TANDEM_RETURN_IF_ERROR(ins->BindInt64(1, round_id));
  TANDEM_RETURN_IF_ERROR(ins->BindBlob(2, secret));
  TANDEM_RETURN_IF_ERROR(ins->StepDone());
  TANDEM_RETURN_IF_ERROR(tx.Commit());
  return std::string(secret);
}

absl::StatusOr<ReportCounts> CountReportRows(sqlite::Database& db, int64_t round_id) {
  // Served by the (round_id, state, counted) index; no share is read.
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::CachedStatement st,
      db.PrepareCached("SELECT state, count(*) FROM reports WHERE round_id = ?1 GROUP BY state"));
  TANDEM_RETURN_IF_ERROR(st->BindInt64(1, round_id));
  ReportCounts counts;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool row, st->Step());
    if (!row) break;
    TANDEM_RETURN_IF_ERROR(AddStateCount(st->ColumnInt64(0), st->ColumnInt64(1), &counts));
  }
  return counts;
}

absl::Status ApplyTransition(sqlite::Database& db, ReportTransition t, absl::string_view drop_share,
                             int64_t round_id, absl::Span<const std::string> ids,
                             absl::string_view op) {
  if (ids.empty()) return absl::OkStatus();
  const TransitionSql sql = TransitionClauses(t, {"1", "counted = 0", drop_share});
  // SQLite counts a matched row as changed even when the values are equal,
  // so a repeated (allowed) transition still changes exactly one row.
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::CachedStatement st,
      db.PrepareCached(absl::StrCat("UPDATE reports SET ", sql.set,
                                    " WHERE report_id = ?1 AND round_id = ?2 AND ", sql.allowed)));
  for (const std::string& id : ids) {
    TANDEM_RETURN_IF_ERROR(st->BindBlob(1, id));
    TANDEM_RETURN_IF_ERROR(st->BindInt64(2, round_id));
    TANDEM_RETURN_IF_ERROR(st->StepDone());
    if (db.ChangedRows() != 1) return TransitionRefused(op, round_id, sql);
    TANDEM_RETURN_IF_ERROR(st->Reset());
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
