#include "aggregator/store/postgres_rows.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

using pg::Connection;
using pg::Param;
using pg::Result;
using pg::Transaction;

// Advisory lock keys ("tandem" in ASCII, then a purpose byte).
constexpr int64_t kMigrationLock = 0x74616e64656d0001;
constexpr int64_t kTaskRegistrationLock = 0x74616e64656d0002;

// Migration step i (1-based) brings the schema from version i-1 to i. Steps
// are only ever appended.
constexpr absl::string_view kMigrations[] = {
    // 1: tasks, rounds, reports, accumulators.
    R"sql(
CREATE TABLE tandem_tasks (
  task_id    TEXT PRIMARY KEY,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE tandem_rounds (
  task_id    TEXT NOT NULL REFERENCES tandem_tasks(task_id),
  round_id   BIGINT NOT NULL CHECK (round_id >= 0),
  parameters BYTEA NOT NULL,
  state      BIGINT NOT NULL,
  PRIMARY KEY (task_id, round_id));
CREATE TABLE tandem_reports (
  task_id      TEXT NOT NULL,
  report_id    BYTEA NOT NULL,
  round_id     BIGINT NOT NULL,
  state        BIGINT NOT NULL,
  counted      BOOLEAN NOT NULL,
  share_digest BYTEA NOT NULL,
  share        BYTEA,
  PRIMARY KEY (task_id, report_id),
  FOREIGN KEY (task_id, round_id) REFERENCES tandem_rounds(task_id, round_id));
-- Shares are random bytes: do not try to compress them.
ALTER TABLE tandem_reports ALTER COLUMN share SET STORAGE EXTERNAL;
CREATE INDEX tandem_reports_by_round ON tandem_reports(task_id, round_id, state, counted);
CREATE TABLE tandem_accumulators (
  task_id      TEXT NOT NULL,
  round_id     BIGINT NOT NULL,
  bytes        BYTEA NOT NULL,
  report_count BIGINT NOT NULL,
  version      BIGINT NOT NULL,
  PRIMARY KEY (task_id, round_id),
  FOREIGN KEY (task_id, round_id) REFERENCES tandem_rounds(task_id, round_id));
)sql",
    // 2: the rounds' secrets (the helper's FLP query seed).
    R"sql(
CREATE TABLE tandem_round_secrets (
  task_id  TEXT NOT NULL,
  round_id BIGINT NOT NULL,
  secret   BYTEA NOT NULL,
  PRIMARY KEY (task_id, round_id),
  FOREIGN KEY (task_id, round_id) REFERENCES tandem_rounds(task_id, round_id));
)sql",
    // 3: replicas (ReplicatedWork). owner: the replica leasing a pending
    // report (until lease_expires) or holding an accepted one in its
    // partial; NULL for a free pending report and in single-replica use.
    R"sql(
ALTER TABLE tandem_reports ADD COLUMN owner TEXT, ADD COLUMN lease_expires TIMESTAMPTZ;
CREATE TABLE tandem_partials (
  task_id      TEXT NOT NULL,
  round_id     BIGINT NOT NULL,
  replica_id   TEXT NOT NULL,
  bytes        BYTEA NOT NULL,
  report_count BIGINT NOT NULL,
  version      BIGINT NOT NULL,
  PRIMARY KEY (task_id, round_id, replica_id),
  FOREIGN KEY (task_id, round_id) REFERENCES tandem_rounds(task_id, round_id));
ALTER TABLE tandem_partials ALTER COLUMN bytes SET STORAGE EXTERNAL;
)sql",
};
static_assert(std::size(kMigrations) == kPostgresSchemaSteps);

}  // namespace

// Decodes and validates row `i` of a reports query (kReportColumns order).
absl::StatusOr<ReportRecord> DecodeReport(const Result& res, int i) {
  ReportRecord r;
  r.report_id = res.Bytes(i, 0);
  TANDEM_ASSIGN_OR_RETURN(r.round_id, res.Int(i, 1));
  TANDEM_ASSIGN_OR_RETURN(const int64_t state, res.Int(i, 2));
  TANDEM_ASSIGN_OR_RETURN(const bool counted, res.Bool(i, 3));
  r.share_digest = res.Bytes(i, 4);
  r.share = res.Bytes(i, 5);
  TANDEM_RETURN_IF_ERROR(CheckStoredReportRow(state, counted ? 1 : 0, &r));
  TANDEM_RETURN_IF_ERROR(CheckStoredShare(r));
  return r;
}

absl::StatusOr<RoundRecord> DecodeRound(const Result& res, int i, int64_t round_id) {
  RoundRecord r;
  r.round_id = round_id;
  r.parameters = res.Bytes(i, 0);
  TANDEM_ASSIGN_OR_RETURN(const int64_t state, res.Int(i, 1));
  if (state < 0 || state > 2) return CorruptStore("round state");
  if (r.parameters.size() > kMaxParametersBytes) return CorruptStore("round parameters");
  r.state = static_cast<RoundState>(state);
  return r;
}

absl::StatusOr<AccumulatorSnapshot> DecodeSnapshot(const Result& res, int64_t round_id,
                                                   absl::string_view what) {
  AccumulatorSnapshot snap{round_id, "", 0, 0};
  if (!res.IsNull(0, 0)) {
    snap.bytes = res.Bytes(0, 0);
    TANDEM_ASSIGN_OR_RETURN(snap.report_count, res.Int(0, 1));
    TANDEM_ASSIGN_OR_RETURN(snap.version, res.Int(0, 2));
    if (snap.report_count < 0 || snap.version < 1) {
      return CorruptStore(absl::StrCat(what, " counters"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(const int64_t counted, res.Int(0, 3));
  if (counted != snap.report_count) {
    return CorruptStore(absl::StrCat(what, " (report count disagrees with counted reports)"));
  }
  return snap;
}

absl::string_view FilterSql(ReportFilter filter) {
  switch (filter) {
    case ReportFilter::kPending:
      return "state = 0";
    case ReportFilter::kAcceptedUncounted:
      return "state = 1 AND NOT counted";
    case ReportFilter::kCounted:
      return "counted";
    case ReportFilter::kRejected:
      return "state = 2";
    case ReportFilter::kAll:
      break;
  }
  return "TRUE";
}

// The per-report state changes of SaveAccumulator, CommitBatch and
// CommitDecisions (report_transition.h), for every id of
// `ids` (distinct, validated) at once; all of them must match.
absl::Status ApplyPostgresTransition(Connection& conn, const std::string& task_id,
                                     ReportTransition t, int64_t round_id,
                                     absl::Span<const std::string> ids, absl::string_view op,
                                     absl::string_view owner) {
  if (ids.empty()) return absl::OkStatus();
  const TransitionSql sql = TransitionClauses(t, {"TRUE", "NOT counted", "share = NULL"});
  // PostgreSQL counts a matched row as changed even when the values are
  // equal, so a repeated (allowed) transition still counts.
  const std::string statement =
      absl::StrCat("UPDATE tandem_reports SET ", sql.set,
                   owner.empty() ? "" : ", owner = $4, lease_expires = NULL",
                   " WHERE task_id = $1 AND round_id = $2 AND report_id = ANY($3) AND ",
                   sql.allowed,
                   owner.empty()                    ? ""
                   : t == ReportTransition::kReject ? " AND (state = 2 OR owner IS NULL OR owner = $4)"
                                                    : " AND (owner IS NULL OR owner = $4)");
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      owner.empty()
          ? conn.Exec(op, statement,
                      {Param::Text(task_id), Param::Int8(round_id), Param::ByteaArray(ids)})
          : conn.Exec(op, statement,
                      {Param::Text(task_id), Param::Int8(round_id), Param::ByteaArray(ids),
                       Param::Text(owner)}));
  if (r.affected() != static_cast<int64_t>(ids.size())) {
    return TransitionRefused(op, round_id, sql);
  }
  return absl::OkStatus();
}

absl::Status MigratePostgresSchema(Connection& conn) {
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(&conn));
  // Replicas starting together queue here; the first applies the steps.
  TANDEM_RETURN_IF_ERROR(
      conn.Exec("schema lock", "SELECT pg_advisory_xact_lock($1)", {Param::Int8(kMigrationLock)})
          .status());
  TANDEM_RETURN_IF_ERROR(
      conn.Command("schema_version",
                   "CREATE TABLE IF NOT EXISTS tandem_schema_version ("
                   "version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"));
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn.Exec("schema_version",
                "SELECT coalesce(max(version), 0)::int8 FROM tandem_schema_version"));
  TANDEM_ASSIGN_OR_RETURN(const int64_t version, r.Int(0, 0));
  if (version < 0) return CorruptStore("schema_version");
  if (version > kPostgresSchemaSteps) {
    return absl::FailedPreconditionError(absl::StrCat("report store: schema version ", version,
                                                      " is newer than this binary's ",
                                                      kPostgresSchemaSteps));
  }
  for (int64_t step = version + 1; step <= kPostgresSchemaSteps; ++step) {
    TANDEM_RETURN_IF_ERROR(conn.Command("schema migration", kMigrations[step - 1]));
    TANDEM_RETURN_IF_ERROR(conn.Exec("schema_version",
                                     "INSERT INTO tandem_schema_version (version) VALUES ($1)",
                                     {Param::Int8(step)})
                               .status());
  }
  return tx.Commit();
}

absl::Status RegisterPostgresTask(Connection& conn, const std::string& task_id,
                                  bool create_if_missing, uint32_t max_tasks) {
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(&conn));
  TANDEM_RETURN_IF_ERROR(conn.Exec("task lock", "SELECT pg_advisory_xact_lock($1)",
                                   {Param::Int8(kTaskRegistrationLock)})
                             .status());
  TANDEM_ASSIGN_OR_RETURN(
      const Result known,
      conn.Exec("task", "SELECT 1 FROM tandem_tasks WHERE task_id = $1", {Param::Text(task_id)}));
  if (known.rows() > 0) return tx.Commit();
  if (!create_if_missing) {
    return absl::NotFoundError(absl::StrCat("no state for task ", task_id));
  }
  if (max_tasks != 0) {
    TANDEM_ASSIGN_OR_RETURN(const Result n, conn.Exec("task", "SELECT count(*) FROM tandem_tasks"));
    TANDEM_ASSIGN_OR_RETURN(const int64_t tasks, n.Int(0, 0));
    if (tasks >= max_tasks) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this aggregator already holds ", max_tasks, " tasks (max_tasks)"));
    }
  }
  TANDEM_RETURN_IF_ERROR(
      conn.Exec("task", "INSERT INTO tandem_tasks (task_id) VALUES ($1)", {Param::Text(task_id)})
          .status());
  return tx.Commit();
}

}  // namespace tandem::aggregator
