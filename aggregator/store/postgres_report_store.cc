#include "aggregator/store/postgres_report_store.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/store/postgres_rows.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

using pg::Connection;
using pg::Param;
using pg::Result;
using pg::Transaction;

static_assert(PostgresReportStore::kSchemaVersion == kPostgresSchemaSteps);

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresReportStore>> PostgresReportStore::Open(
    const std::string& conninfo, const std::string& task_id, PostgresStoreOptions options) {
  if (task_id.empty() || task_id.size() > 255) {
    return absl::InvalidArgumentError("postgres report store: task id must have 1..255 bytes");
  }
  if (!options.replica_id.empty()) TANDEM_RETURN_IF_ERROR(ValidateReplicaId(options.replica_id));
  if (options.lease_ms < 1) return absl::InvalidArgumentError("lease_ms must be >= 1");
  std::unique_ptr<PostgresReportStore> store(
      new PostgresReportStore(conninfo, task_id, std::move(options)));
  absl::MutexLock lock(&store->mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, store->ConnLocked());
  TANDEM_RETURN_IF_ERROR(MigratePostgresSchema(*conn));
  TANDEM_RETURN_IF_ERROR(RegisterPostgresTask(
      *conn, store->task_id_, store->options_.create_if_missing, store->options_.max_tasks));
  return store;
}

absl::StatusOr<Connection*> PostgresReportStore::ConnLocked() {
  if (conn_ != nullptr && !conn_->broken() && conn_->idle()) return conn_.get();
  conn_.reset();
  TANDEM_ASSIGN_OR_RETURN(conn_, Connection::Open(conninfo_, options_.application_name));
  return conn_.get();
}

absl::Status PostgresReportStore::CommitLocked(Transaction& tx, absl::string_view op) {
  if (options_.before_commit) options_.before_commit(op);
  return tx.Commit();
}

absl::StatusOr<RoundRecord> PostgresReportStore::ReadRound(Connection& conn, int64_t round_id,
                                                           absl::string_view lock) {
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn.Exec("read round",
                absl::StrCat("SELECT parameters, state FROM tandem_rounds WHERE task_id = $1 AND "
                             "round_id = $2",
                             lock),
                {Param::Text(task_id_), Param::Int8(round_id)}));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  return DecodeRound(r, 0, round_id);
}

absl::Status PostgresReportStore::RequireOpen(Connection& conn, int64_t round_id,
                                              absl::string_view lock) {
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord r, ReadRound(conn, round_id, lock));
  if (r.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReportRecord> PostgresReportStore::ReadReportRow(Connection& conn,
                                                                absl::string_view report_id) {
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn.Exec("read report",
                absl::StrCat("SELECT ", kReportColumns,
                             " FROM tandem_reports WHERE task_id = $1 AND report_id = $2"),
                {Param::Text(task_id_), Param::Bytea(report_id)}));
  if (r.rows() == 0) return absl::NotFoundError("report not found");
  return DecodeReport(r, 0);
}

absl::Status PostgresReportStore::OpenRound(int64_t round_id, absl::string_view parameters) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateParameters(parameters));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(
      const Result ins,
      conn->Exec("OpenRound",
                 "INSERT INTO tandem_rounds VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING",
                 {Param::Text(task_id_), Param::Int8(round_id), Param::Bytea(parameters)}));
  if (ins.affected() == 1) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord existing, ReadRound(*conn, round_id, ""));
  if (existing.parameters != parameters) {
    return absl::AlreadyExistsError(
        absl::StrCat("round ", round_id, " exists with other parameters"));
  }
  if (existing.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return absl::OkStatus();
}

absl::Status PostgresReportStore::CloseRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(
      const Result up,
      conn->Exec("CloseRound",
                 "UPDATE tandem_rounds SET state = 1 WHERE task_id = $1 AND round_id = $2 AND "
                 "state = 0",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  if (up.affected() == 1) return absl::OkStatus();
  return ReadRound(*conn, round_id, "").status();  // closed already, or NOT_FOUND
}

absl::Status PostgresReportStore::ReleaseRound(int64_t round_id, absl::string_view bytes) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, {}));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  TANDEM_RETURN_IF_ERROR(
      conn->Exec("ReleaseRound",
                 "INSERT INTO tandem_accumulators VALUES ($1, $2, $3, 0, 1) ON CONFLICT "
                 "(task_id, round_id) DO UPDATE SET bytes = EXCLUDED.bytes, version = "
                 "tandem_accumulators.version + 1",
                 {Param::Text(task_id_), Param::Int8(round_id), Param::Bytea(bytes)})
          .status());
  TANDEM_RETURN_IF_ERROR(
      conn->Exec("ReleaseRound",
                 "UPDATE tandem_rounds SET state = 2 WHERE task_id = $1 AND round_id = $2",
                 {Param::Text(task_id_), Param::Int8(round_id)})
          .status());
  return CommitLocked(tx, "ReleaseRound");
}

absl::StatusOr<RoundRecord> PostgresReportStore::GetRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  return ReadRound(*conn, round_id, "");
}

absl::StatusOr<std::string> PostgresReportStore::BindRoundSecret(int64_t round_id,
                                                                 absl::string_view secret) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateRoundSecret(secret));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  // FOR UPDATE: concurrent binders of the round queue here, so the second
  // reads the first one's committed secret.
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord round, ReadRound(*conn, round_id, " FOR UPDATE"));
  TANDEM_ASSIGN_OR_RETURN(
      const Result get,
      conn->Exec("BindRoundSecret",
                 "SELECT secret FROM tandem_round_secrets WHERE task_id = $1 AND round_id = $2",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  if (get.rows() > 0) {
    std::string stored = get.Bytes(0, 0);
    if (!ValidateRoundSecret(stored).ok()) return CorruptStore("round secret");
    return stored;
  }
  if (round.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  TANDEM_RETURN_IF_ERROR(
      conn->Exec("BindRoundSecret", "INSERT INTO tandem_round_secrets VALUES ($1, $2, $3)",
                 {Param::Text(task_id_), Param::Int8(round_id), Param::Bytea(secret)})
          .status());
  TANDEM_RETURN_IF_ERROR(CommitLocked(tx, "BindRoundSecret"));
  return std::string(secret);
}

absl::StatusOr<std::vector<RoundRecord>> PostgresReportStore::ListRounds() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("ListRounds",
                 "SELECT parameters, state, round_id FROM tandem_rounds WHERE task_id = $1 "
                 "ORDER BY round_id",
                 {Param::Text(task_id_)}));
  std::vector<RoundRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t id, r.Int(i, 2));
    if (!ValidateRoundId(id).ok()) return CorruptStore("round id");
    TANDEM_ASSIGN_OR_RETURN(RoundRecord round, DecodeRound(r, i, id));
    out.push_back(std::move(round));
  }
  return out;
}

absl::Status PostgresReportStore::PutPendingRow(Connection& conn, int64_t round_id,
                                                absl::string_view report_id,
                                                absl::string_view share) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  TANDEM_RETURN_IF_ERROR(ValidateShare(share));
  const std::string digest = ShareDigest(share);
  // ON CONFLICT waits for a concurrent inserter of the same id to finish.
  TANDEM_ASSIGN_OR_RETURN(
      const Result ins,
      conn.Exec("PutPending",
                "INSERT INTO tandem_reports VALUES ($1, $2, $3, 0, FALSE, $4, $5) ON CONFLICT "
                "(task_id, report_id) DO NOTHING",
                {Param::Text(task_id_), Param::Bytea(report_id), Param::Int8(round_id),
                 Param::Bytea(digest), Param::Bytea(share)}));
  if (ins.affected() == 1) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(
      const Result old,
      conn.Exec("PutPending",
                "SELECT round_id, share_digest FROM tandem_reports WHERE task_id = $1 AND "
                "report_id = $2",
                {Param::Text(task_id_), Param::Bytea(report_id)}));
  if (old.rows() != 1) return absl::InternalError("PutPending: conflicting report vanished");
  TANDEM_ASSIGN_OR_RETURN(const int64_t old_round, old.Int(0, 0));
  if (old_round == round_id && old.Bytes(0, 1) == digest) return absl::OkStatus();
  return absl::AlreadyExistsError("report id already used (replay or conflicting content)");
}

absl::Status PostgresReportStore::PutPending(int64_t round_id, absl::string_view report_id,
                                             absl::string_view share) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR SHARE"));
  TANDEM_RETURN_IF_ERROR(PutPendingRow(*conn, round_id, report_id, share));
  return CommitLocked(tx, "PutPending");
}

absl::StatusOr<std::vector<absl::Status>> PostgresReportStore::PutPendingBatch(
    int64_t round_id, absl::Span<const PendingReport> reports) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR SHARE"));
  // Inserted in report id order, so replicas inserting overlapping batches
  // take the id locks in the same order (no deadlock); answered in input
  // order. Identical ids stay in input order (stable sort).
  std::vector<size_t> order(reports.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reports[a].report_id < reports[b].report_id; });
  std::vector<absl::Status> out(reports.size());
  for (size_t i : order) {
    absl::Status s = PutPendingRow(*conn, round_id, reports[i].report_id, reports[i].share);
    // Per-report refusals are answers; anything else aborts the batch.
    if (!s.ok() && !absl::IsAlreadyExists(s) && !absl::IsInvalidArgument(s)) return s;
    out[i] = std::move(s);
  }
  TANDEM_RETURN_IF_ERROR(CommitLocked(tx, "PutPendingBatch"));
  return out;
}

absl::Status PostgresReportStore::Transition(absl::string_view report_id, ReportState to) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_ASSIGN_OR_RETURN(const ReportRecord r, ReadReportRow(*conn, report_id));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, r.round_id, " FOR SHARE"));
  // Rejected reports drop their share; accepted ones keep it until counted.
  TANDEM_ASSIGN_OR_RETURN(
      const Result up,
      conn->Exec(
          to == ReportState::kRejected ? "MarkRejected" : "MarkAccepted",
          to == ReportState::kRejected
              ? "UPDATE tandem_reports SET state = $3, share = NULL WHERE task_id = $1 "
                "AND report_id = $2 AND state = 0"
              : "UPDATE tandem_reports SET state = $3 WHERE task_id = $1 AND "
                "report_id = $2 AND state = 0",
          {Param::Text(task_id_), Param::Bytea(report_id), Param::Int8(static_cast<int64_t>(to))}));
  if (up.affected() == 1) {
    return CommitLocked(tx, to == ReportState::kRejected ? "MarkRejected" : "MarkAccepted");
  }
  // Not pending (any more): a repeat of the same transition is a no-op.
  TANDEM_ASSIGN_OR_RETURN(const ReportRecord now, ReadReportRow(*conn, report_id));
  if (now.state == to) return absl::OkStatus();
  return absl::FailedPreconditionError("report is no longer pending: transition refused");
}

absl::Status PostgresReportStore::MarkAccepted(absl::string_view report_id) {
  return Transition(report_id, ReportState::kAccepted);
}

absl::Status PostgresReportStore::MarkRejected(absl::string_view report_id) {
  return Transition(report_id, ReportState::kRejected);
}

absl::StatusOr<ReportRecord> PostgresReportStore::GetReport(absl::string_view report_id) {
  TANDEM_RETURN_IF_ERROR(ValidateReportId(report_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  return ReadReportRow(*conn, report_id);
}

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> PostgresReportStore::GetReports(
    absl::Span<const std::string> report_ids) {
  for (const std::string& id : report_ids) TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
  absl::flat_hash_map<std::string, ReportRecord> out;
  if (report_ids.empty()) return out;
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("GetReports",
                 absl::StrCat("SELECT ", kReportColumns,
                              " FROM tandem_reports WHERE task_id = $1 AND report_id = ANY($2)"),
                 {Param::Text(task_id_), Param::ByteaArray(report_ids)}));
  for (int i = 0; i < r.rows(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(ReportRecord rec, DecodeReport(r, i));
    std::string id = rec.report_id;
    out.insert_or_assign(std::move(id), std::move(rec));
  }
  return out;
}

absl::StatusOr<ReportCounts> PostgresReportStore::CountReports(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  // Served by the (task_id, round_id, state, counted) index; no share is read.
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("CountReports",
                 "SELECT state, count(*) FROM tandem_reports WHERE task_id = $1 AND "
                 "round_id = $2 GROUP BY state",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  ReportCounts counts;
  for (int i = 0; i < r.rows(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t state, r.Int(i, 0));
    TANDEM_ASSIGN_OR_RETURN(const int64_t n, r.Int(i, 1));
    TANDEM_RETURN_IF_ERROR(AddStateCount(state, n, &counts));
  }
  return counts;
}

absl::StatusOr<std::vector<ReportRecord>> PostgresReportStore::ListReports(int64_t round_id,
                                                                           ReportFilter filter) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_RETURN_IF_ERROR(ReadRound(*conn, round_id, "").status());
  // A replica's accepted-uncounted reports are those in its own partial.
  const bool mine = filter == ReportFilter::kAcceptedUncounted && !options_.replica_id.empty();
  const std::string sql =
      absl::StrCat("SELECT ", kReportColumns,
                   " FROM tandem_reports WHERE task_id = $1 AND round_id = $2 AND ",
                   FilterSql(filter), mine ? " AND owner = $3" : "", " ORDER BY report_id");
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      mine ? conn->Exec("ListReports", sql,
                        {Param::Text(task_id_), Param::Int8(round_id),
                         Param::Text(options_.replica_id)})
           : conn->Exec("ListReports", sql, {Param::Text(task_id_), Param::Int8(round_id)}));
  return DecodeReports(r);
}

absl::StatusOr<std::vector<ReportRecord>> PostgresReportStore::DecodeReports(const Result& r) {
  std::vector<ReportRecord> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(ReportRecord rec, DecodeReport(r, i));
    out.push_back(std::move(rec));
  }
  std::sort(out.begin(), out.end(), [](const ReportRecord& a, const ReportRecord& b) {
    return a.report_id < b.report_id;
  });
  return out;
}

absl::Status PostgresReportStore::WriteAccumulator(Connection& conn, int64_t round_id,
                                                   absl::string_view bytes, int64_t newly_counted) {
  if (!options_.replica_id.empty()) {
    return conn
        .Exec("partial",
              "INSERT INTO tandem_partials VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (task_id, "
              "round_id, replica_id) DO UPDATE SET bytes = EXCLUDED.bytes, report_count = "
              "tandem_partials.report_count + EXCLUDED.report_count, version = "
              "tandem_partials.version + 1",
              {Param::Text(task_id_), Param::Int8(round_id), Param::Text(options_.replica_id),
               Param::Bytea(bytes), Param::Int8(newly_counted)})
        .status();
  }
  return conn
      .Exec("accumulator",
            "INSERT INTO tandem_accumulators VALUES ($1, $2, $3, $4, 1) ON CONFLICT (task_id, "
            "round_id) DO UPDATE SET bytes = EXCLUDED.bytes, report_count = "
            "tandem_accumulators.report_count + EXCLUDED.report_count, version = "
            "tandem_accumulators.version + 1",
            {Param::Text(task_id_), Param::Int8(round_id), Param::Bytea(bytes),
             Param::Int8(newly_counted)})
      .status();
}

absl::Status PostgresReportStore::SaveAccumulator(int64_t round_id, absl::string_view bytes,
                                                  absl::Span<const std::string> newly_counted) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, newly_counted));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  TANDEM_RETURN_IF_ERROR(ApplyPostgresTransition(*conn, task_id_, ReportTransition::kCount,
                                                 round_id, newly_counted, "SaveAccumulator", options_.replica_id));
  TANDEM_RETURN_IF_ERROR(
      WriteAccumulator(*conn, round_id, bytes, static_cast<int64_t>(newly_counted.size())));
  return CommitLocked(tx, "SaveAccumulator");
}

absl::Status PostgresReportStore::CommitBatch(int64_t round_id, absl::string_view bytes,
                                              absl::Span<const std::string> accept_and_count,
                                              absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch(bytes, accept_and_count, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  // Any failure returns before COMMIT, so the transaction rolls back whole.
  TANDEM_RETURN_IF_ERROR(ApplyPostgresTransition(*conn, task_id_, ReportTransition::kAcceptAndCount,
                                                 round_id, accept_and_count, "CommitBatch", options_.replica_id));
  TANDEM_RETURN_IF_ERROR(ApplyPostgresTransition(*conn, task_id_, ReportTransition::kReject,
                                                 round_id, reject, "CommitBatch", options_.replica_id));
  if (!accept_and_count.empty()) {
    TANDEM_RETURN_IF_ERROR(
        WriteAccumulator(*conn, round_id, bytes, static_cast<int64_t>(accept_and_count.size())));
  }
  return CommitLocked(tx, "CommitBatch");
}

absl::Status PostgresReportStore::CommitDecisions(int64_t round_id,
                                                  absl::Span<const std::string> accept,
                                                  absl::Span<const std::string> reject) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateCommitBatch("", accept, reject));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  // Accepted reports keep their share (uncounted until the next checkpoint).
  TANDEM_RETURN_IF_ERROR(ApplyPostgresTransition(*conn, task_id_, ReportTransition::kAccept,
                                                 round_id, accept, "CommitDecisions", options_.replica_id));
  TANDEM_RETURN_IF_ERROR(ApplyPostgresTransition(*conn, task_id_, ReportTransition::kReject,
                                                 round_id, reject, "CommitDecisions", options_.replica_id));
  return CommitLocked(tx, "CommitDecisions");
}

absl::StatusOr<AccumulatorSnapshot> PostgresReportStore::LoadAccumulator(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  if (!options_.replica_id.empty()) {
    TANDEM_ASSIGN_OR_RETURN(const RoundRecord round, ReadRound(*conn, round_id, ""));
    if (round.state != RoundState::kReleased) return LoadPartial(*conn, round_id);
  }
  // One statement, one snapshot: the accumulator and the counted reports
  // written by the same transactions.
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("LoadAccumulator",
                 "SELECT a.bytes, a.report_count, a.version, (SELECT count(*) FROM "
                 "tandem_reports p WHERE p.task_id = r.task_id AND p.round_id = r.round_id AND "
                 "p.counted) FROM tandem_rounds r LEFT JOIN tandem_accumulators a ON a.task_id "
                 "= r.task_id AND a.round_id = r.round_id WHERE r.task_id = $1 AND r.round_id "
                 "= $2",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  return DecodeSnapshot(r, round_id, "accumulator");
}

}  // namespace tandem::aggregator
