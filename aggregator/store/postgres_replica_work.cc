// PostgresReportStore's ReplicatedWork (report_store.h): leases on pending
// reports, adoption of accepted-uncounted ones, partial accumulators and the
// release of their sum. Every statement is keyed by (task_id, round_id) and
// the owner column (migration 3, postgres_rows.cc).
//
// Why the release checks counts rather than trusting its caller: replicas
// commit concurrently, so a partial can grow between the Finalize that
// summed the partials and its release. ReleaseSummed takes the round's row
// lock FOR UPDATE -- the lock every commit takes -- and compares the number
// of counted reports with the caller's sum, so a release always holds every
// counted report exactly once, or none is released (ABORTED, sum again).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "aggregator/store/postgres_report_store.h"
#include "aggregator/store/postgres_rows.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

using pg::Connection;
using pg::Param;
using pg::Result;
using pg::Transaction;

absl::Status PostgresReportStore::RequireReplica() const {
  if (options_.replica_id.empty()) {
    return absl::FailedPreconditionError("report store: replica operations need a replica id");
  }
  return absl::OkStatus();
}

absl::StatusOr<AccumulatorSnapshot> PostgresReportStore::LoadPartial(Connection& conn,
                                                                     int64_t round_id) {
  // One statement, one snapshot: the partial and the reports counted in it.
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn.Exec("LoadAccumulator",
                "SELECT a.bytes, a.report_count, a.version, (SELECT count(*) FROM "
                "tandem_reports p WHERE p.task_id = $1 AND p.round_id = $2 AND p.counted AND "
                "p.owner = $3) FROM (SELECT 1) one LEFT JOIN tandem_partials a ON a.task_id = $1 "
                "AND a.round_id = $2 AND a.replica_id = $3",
                {Param::Text(task_id_), Param::Int8(round_id), Param::Text(options_.replica_id)}));
  return DecodeSnapshot(r, round_id, "partial accumulator");
}

absl::StatusOr<std::vector<ReportRecord>> PostgresReportStore::ClaimPending(int64_t round_id,
                                                                            int limit, bool steal) {
  TANDEM_RETURN_IF_ERROR(RequireReplica());
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  if (limit < 1) return absl::InvalidArgumentError("ClaimPending: limit must be >= 1");
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR SHARE"));
  // SKIP LOCKED: a report another replica is claiming right now is left to
  // it, so concurrent claims get disjoint batches without waiting. The
  // lease ends on the database's clock.
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec(
          "ClaimPending",
          absl::StrCat("UPDATE tandem_reports SET owner = $3, lease_expires = "
                       "clock_timestamp() + $5::int8 * interval '1 millisecond' WHERE "
                       "task_id = $1 AND report_id IN (SELECT report_id FROM "
                       "tandem_reports WHERE task_id = $1 AND round_id = $2 AND state = 0",
                       steal ? "" : " AND (owner IS NULL OR lease_expires < clock_timestamp())",
                       " ORDER BY report_id LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING ",
                       kReportColumns),
          {Param::Text(task_id_), Param::Int8(round_id), Param::Text(options_.replica_id),
           Param::Int8(limit), Param::Int8(options_.lease_ms)}));
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> out, DecodeReports(r));
  TANDEM_RETURN_IF_ERROR(CommitLocked(tx, "ClaimPending"));
  return out;
}

absl::Status PostgresReportStore::ReleaseLeases(int64_t round_id,
                                                absl::Span<const std::string> ids) {
  TANDEM_RETURN_IF_ERROR(RequireReplica());
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  for (const std::string& id : ids) TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
  if (ids.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  return conn
      ->Exec("ReleaseLeases",
             "UPDATE tandem_reports SET owner = NULL, lease_expires = NULL WHERE task_id = $1 AND "
             "round_id = $2 AND report_id = ANY($3) AND state = 0 AND owner = $4",
             {Param::Text(task_id_), Param::Int8(round_id), Param::ByteaArray(ids),
              Param::Text(options_.replica_id)})
      .status();
}

absl::StatusOr<std::vector<ReportRecord>> PostgresReportStore::AdoptUncounted(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(RequireReplica());
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  // FOR UPDATE: the lock of every commit, so no replica is between reading
  // its uncounted reports and saving them while they change hands.
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("AdoptUncounted",
                 absl::StrCat("UPDATE tandem_reports SET owner = $3 WHERE task_id = $1 AND "
                              "round_id = $2 AND state = 1 AND NOT counted AND owner IS "
                              "DISTINCT FROM $3 RETURNING ",
                              kReportColumns),
                 {Param::Text(task_id_), Param::Int8(round_id), Param::Text(options_.replica_id)}));
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> out, DecodeReports(r));
  TANDEM_RETURN_IF_ERROR(CommitLocked(tx, "AdoptUncounted"));
  return out;
}

absl::StatusOr<std::vector<PartialAccumulator>> PostgresReportStore::ListPartials(
    int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(RequireReplica());
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("ListPartials",
                 "SELECT replica_id, bytes, report_count, version FROM tandem_partials WHERE "
                 "task_id = $1 AND round_id = $2 ORDER BY replica_id",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  std::vector<PartialAccumulator> out(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    PartialAccumulator& p = out[static_cast<size_t>(i)];
    p.replica_id = r.Bytes(i, 0);
    p.bytes = r.Bytes(i, 1);
    TANDEM_ASSIGN_OR_RETURN(p.report_count, r.Int(i, 2));
    TANDEM_ASSIGN_OR_RETURN(p.version, r.Int(i, 3));
    if (!ValidateReplicaId(p.replica_id).ok() || p.report_count < 0 || p.version < 1 ||
        p.bytes.size() > kMaxAccumulatorBytes) {
      return CorruptStore("partial accumulator row");
    }
  }
  return out;
}

absl::Status PostgresReportStore::ReleaseSummed(int64_t round_id, absl::string_view bytes,
                                                int64_t counted) {
  TANDEM_RETURN_IF_ERROR(RequireReplica());
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(bytes, {}));
  if (counted < 0) return absl::InvalidArgumentError("ReleaseSummed: negative count");
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Connection * conn, ConnLocked());
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(conn));
  TANDEM_RETURN_IF_ERROR(RequireOpen(*conn, round_id, " FOR UPDATE"));
  TANDEM_ASSIGN_OR_RETURN(
      const Result r,
      conn->Exec("ReleaseSummed",
                 "SELECT count(*) FILTER (WHERE counted), count(*) FILTER (WHERE state = 1 AND "
                 "NOT counted), (SELECT coalesce(sum(report_count), 0)::int8 FROM "
                 "tandem_partials WHERE task_id = $1 AND round_id = $2) FROM tandem_reports "
                 "WHERE task_id = $1 AND round_id = $2",
                 {Param::Text(task_id_), Param::Int8(round_id)}));
  TANDEM_ASSIGN_OR_RETURN(const int64_t now_counted, r.Int(0, 0));
  TANDEM_ASSIGN_OR_RETURN(const int64_t uncounted, r.Int(0, 1));
  TANDEM_ASSIGN_OR_RETURN(const int64_t in_partials, r.Int(0, 2));
  if (in_partials != now_counted) {
    return CorruptStore("partials (their report counts disagree with the counted reports)");
  }
  if (now_counted != counted || uncounted != 0) {
    return absl::AbortedError(
        absl::StrCat("round ", round_id, " changed while it was summed: ", now_counted,
                     " counted (summed ", counted, "), ", uncounted, " accepted but uncounted"));
  }
  TANDEM_RETURN_IF_ERROR(
      conn->Exec("ReleaseSummed",
                 "INSERT INTO tandem_accumulators VALUES ($1, $2, $3, $4, 1) ON CONFLICT "
                 "(task_id, round_id) DO UPDATE SET bytes = EXCLUDED.bytes, report_count = "
                 "EXCLUDED.report_count, version = tandem_accumulators.version + 1",
                 {Param::Text(task_id_), Param::Int8(round_id), Param::Bytea(bytes),
                  Param::Int8(counted)})
          .status());
  TANDEM_RETURN_IF_ERROR(
      conn->Exec("ReleaseSummed",
                 "UPDATE tandem_rounds SET state = 2 WHERE task_id = $1 AND round_id = $2",
                 {Param::Text(task_id_), Param::Int8(round_id)})
          .status());
  return CommitLocked(tx, "ReleaseSummed");
}

}  // namespace tandem::aggregator
