// ReportStore on a PostgreSQL server (libpq), for aggregators that run as
// several replicas over one database. The semantics are SqliteReportStore's
// (report_store.h); what differs is who may share the data:
//
//  * One database holds many tasks: every table is keyed by task_id
//    (tandem_tasks, tandem_rounds, tandem_reports, tandem_accumulators,
//    tandem_round_secrets; schema in postgres_report_store.cc).
//  * Several store objects -- in one process or in several replicas -- may
//    serve the same task at once. Each call is one transaction (READ
//    COMMITTED) that locks the round's row first: FOR SHARE for uploads and
//    single-report transitions (they run concurrently, a CloseRound or
//    ReleaseRound waits for them), FOR UPDATE for the accumulator writes,
//    CommitDecisions, ReleaseRound and BindRoundSecret, so a round gets one
//    accumulator history, one release and one secret (the first wins, also
//    across processes). Replays are refused across replicas by the
//    (task_id, report_id) primary key.
//  * Schema migrations are versioned (tandem_schema_version: one row per
//    applied step) and applied in one transaction under an advisory lock,
//    so replicas starting together migrate once.
//  * Replicas (PostgresStoreOptions::replica_id set): the store is also the
//    replicas' ReplicatedWork (report_store.h). tandem_reports.owner names
//    the replica leasing a pending report (until lease_expires, database
//    time, so replicas' clocks do not matter) or holding an accepted one in
//    its partial accumulator (tandem_partials, one row per replica); every
//    transition checks the owner inside its transaction, under the round's
//    row lock. ReleaseSummed writes the released share to
//    tandem_accumulators. A database is used either by one aggregator
//    without a replica id or by replicas, not both in one round.
//  * A call returns OK only after COMMIT returned: an acknowledged upload is
//    as durable as the server's commit (synchronous_commit).
//
// Shares, secrets and accumulators travel as binary BYTEA parameters; they
// are never written into SQL text or error messages.
//
// Errors: as report_store.h; a lost connection, a server shutting down or
// restarting, a serialization failure or a deadlock is UNAVAILABLE (the call
// changed nothing, or -- for a lost COMMIT -- maybe everything; every call is
// idempotent, so retry), and the next call reconnects. Other server errors
// are INTERNAL.
//
// Thread safety: thread-safe; one connection guarded by a mutex.
#ifndef TANDEM_AGGREGATOR_STORE_POSTGRES_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_POSTGRES_REPORT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/store/postgres_connection.h"
#include "aggregator/store/report_store.h"

namespace tandem::aggregator {

struct PostgresStoreOptions {
  // false: Open returns NOT_FOUND for a task the database does not hold.
  bool create_if_missing = true;
  // Tasks the database may hold (0 = no limit): creating one more is
  // RESOURCE_EXHAUSTED. Counted in the database, so the limit holds across
  // restarts and replicas.
  uint32_t max_tasks = 0;
  // Shown in pg_stat_activity.
  std::string application_name = "tandem-aggregator";
  // Non-empty: this store is one replica's view (ReplicatedWork);
  // ValidateReplicaId. Empty: the only aggregator on the database.
  std::string replica_id;
  // How long ClaimPending's leases last (ms, >= 1).
  int64_t lease_ms = 30000;
  // Test seam: called with the operation's name after a write transaction's
  // statements ran, just before its COMMIT is sent. Unset in production.
  std::function<void(absl::string_view op)> before_commit;
};

class PostgresReportStore : public ReportStore, public ReplicatedWork {
 public:
  // Steps of tandem_schema_version this binary knows.
  static constexpr int64_t kSchemaVersion = 3;  // 2: round secrets, 3: replicas

  // Connects to `conninfo` (a libpq connection string or URI), applies the
  // missing schema migrations and registers `task_id` (1 to 255 bytes).
  // UNAVAILABLE when the server cannot be reached; FAILED_PRECONDITION for a
  // database whose schema is newer than this binary's; NOT_FOUND /
  // RESOURCE_EXHAUSTED as PostgresStoreOptions says.
  static absl::StatusOr<std::unique_ptr<PostgresReportStore>> Open(
      const std::string& conninfo, const std::string& task_id, PostgresStoreOptions options = {});

  absl::Status OpenRound(int64_t round_id, absl::string_view parameters) override;
  absl::Status CloseRound(int64_t round_id) override;
  absl::Status ReleaseRound(int64_t round_id, absl::string_view bytes) override;
  absl::StatusOr<RoundRecord> GetRound(int64_t round_id) override;
  absl::StatusOr<std::string> BindRoundSecret(int64_t round_id, absl::string_view secret) override;
  absl::StatusOr<std::vector<RoundRecord>> ListRounds() override;
  absl::Status PutPending(int64_t round_id, absl::string_view report_id,
                          absl::string_view share) override;
  absl::StatusOr<std::vector<absl::Status>> PutPendingBatch(
      int64_t round_id, absl::Span<const PendingReport> reports) override;
  absl::Status MarkAccepted(absl::string_view report_id) override;
  absl::Status MarkRejected(absl::string_view report_id) override;
  absl::StatusOr<ReportRecord> GetReport(absl::string_view report_id) override;
  absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> GetReports(
      absl::Span<const std::string> report_ids) override;
  absl::StatusOr<ReportCounts> CountReports(int64_t round_id) override;
  absl::StatusOr<std::vector<ReportRecord>> ListReports(int64_t round_id,
                                                        ReportFilter filter) override;
  absl::Status SaveAccumulator(int64_t round_id, absl::string_view bytes,
                               absl::Span<const std::string> newly_counted) override;
  absl::Status CommitBatch(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> accept_and_count,
                           absl::Span<const std::string> reject) override;
  absl::Status CommitDecisions(int64_t round_id, absl::Span<const std::string> accept,
                               absl::Span<const std::string> reject) override;
  absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t round_id) override;
  ReplicatedWork* replicated() override {
    return options_.replica_id.empty() ? nullptr : this;
  }

  // ReplicatedWork (postgres_replica_work.cc); FAILED_PRECONDITION without
  // a replica id.
  const std::string& replica_id() const override { return options_.replica_id; }
  absl::StatusOr<std::vector<ReportRecord>> ClaimPending(int64_t round_id, int limit,
                                                         bool steal) override;
  absl::Status ReleaseLeases(int64_t round_id, absl::Span<const std::string> ids) override;
  absl::StatusOr<std::vector<ReportRecord>> AdoptUncounted(int64_t round_id) override;
  absl::StatusOr<std::vector<PartialAccumulator>> ListPartials(int64_t round_id) override;
  absl::Status ReleaseSummed(int64_t round_id, absl::string_view bytes, int64_t counted) override;

 private:
  PostgresReportStore(std::string conninfo, std::string task_id, PostgresStoreOptions options)
      : conninfo_(std::move(conninfo)),
        task_id_(std::move(task_id)),
        options_(std::move(options)) {}

  // The connection, reconnecting when the previous one was lost.
  absl::StatusOr<pg::Connection*> ConnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // COMMIT (after the before_commit seam).
  absl::Status CommitLocked(pg::Transaction& tx, absl::string_view op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Transition(absl::string_view report_id, ReportState to);
  // The round's row, locked with `lock` ("", " FOR SHARE", " FOR UPDATE").
  absl::StatusOr<RoundRecord> ReadRound(pg::Connection& conn, int64_t round_id,
                                        absl::string_view lock);
  // ReadRound plus FAILED_PRECONDITION "round N is closed" unless open.
  absl::Status RequireOpen(pg::Connection& conn, int64_t round_id, absl::string_view lock);
  absl::StatusOr<ReportRecord> ReadReportRow(pg::Connection& conn, absl::string_view report_id);
  // Inserts one pending report (idempotent for identical content).
  absl::Status PutPendingRow(pg::Connection& conn, int64_t round_id, absl::string_view report_id,
                             absl::string_view share);
  // The round's accumulator, or with a replica id this replica's partial.
  absl::Status WriteAccumulator(pg::Connection& conn, int64_t round_id, absl::string_view bytes,
                                int64_t newly_counted);
  // LoadAccumulator of an open or closed round with a replica id.
  absl::StatusOr<AccumulatorSnapshot> LoadPartial(pg::Connection& conn, int64_t round_id);
  // FAILED_PRECONDITION unless this store has a replica id.
  absl::Status RequireReplica() const;
  // Reports of a RETURNING kReportColumns result, ordered by report id.
  static absl::StatusOr<std::vector<ReportRecord>> DecodeReports(const pg::Result& r);

  const std::string conninfo_;
  const std::string task_id_;
  const PostgresStoreOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<pg::Connection> conn_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_POSTGRES_REPORT_STORE_H_
