// ReportStore on an SQLite file (base/sqlite): WAL mode, synchronous=FULL by
// default, so every acknowledged call survives SIGKILL and power loss.
//
// Schema (version 1, recorded in schema_version):
//   rounds(round_id PK, parameters BLOB, state INT)
//   reports(report_id BLOB PK, round_id INT, state INT, counted INT,
//           share_digest BLOB(32), share BLOB NULL)
//   accumulators(round_id PK, bytes BLOB, report_count INT, version INT)
// Every mutating call is one IMMEDIATE transaction; SaveAccumulator marks the
// reports counted and writes the bytes in the same transaction (the crash
// invariant of report_store.h). Rows read back are validated (DATA_LOSS on
// out-of-range values), the file's schema version is checked on Open
// (FAILED_PRECONDITION for a newer version than this code knows).
//
// Thread safety: thread-safe; one connection guarded by a mutex, and in WAL
// mode a second, query-only connection (its own mutex) for GetReportStates,
// so that an upload's duplicate check reads the last committed state
// instead of waiting for a group commit in progress (its fsync). Other
// processes may open the same file (writers serialize on the busy timeout).
#ifndef TANDEM_AGGREGATOR_STORE_SQLITE_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_SQLITE_REPORT_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "aggregator/store/report_store.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

class SqliteReportStore : public ReportStore {
 public:
  static constexpr int64_t kSchemaVersion = 2;  // 2: round secrets

  // Opens or creates the store at `path`. Returns the sqlite::Database::Open
  // errors, DATA_LOSS for a file with a damaged schema_version table and
  // FAILED_PRECONDITION for a newer schema.
  static absl::StatusOr<std::unique_ptr<SqliteReportStore>> Open(
      const std::string& path, const sqlite::DatabaseOptions& options = {});

  absl::Status OpenRound(int64_t round_id, absl::string_view parameters) override;
  absl::Status CloseRound(int64_t round_id) override;
  absl::Status ReleaseRound(int64_t round_id, absl::string_view bytes) override;
  // One transaction: ReleaseRound's, with newly_counted's transitions.
  absl::Status CountAndRelease(int64_t round_id, absl::string_view counted,
                               absl::Span<const std::string> newly_counted,
                               absl::string_view released) override;
  absl::StatusOr<RoundRecord> GetRound(int64_t round_id) override;
  absl::StatusOr<std::string> BindRoundSecret(int64_t round_id,
                                              absl::string_view secret) override;
  absl::StatusOr<std::vector<RoundRecord>> ListRounds() override;
  absl::Status PutPending(int64_t round_id, absl::string_view report_id,
                          absl::string_view share) override;
  absl::StatusOr<std::vector<absl::Status>> PutPendingBatch(
      int64_t round_id, absl::Span<const PendingReport> reports) override;
  absl::Status MarkAccepted(absl::string_view report_id) override;
  absl::Status MarkRejected(absl::string_view report_id) override;
  absl::StatusOr<ReportRecord> GetReport(absl::string_view report_id) override;
  absl::StatusOr<ReportCounts> CountReports(int64_t round_id) override;
  absl::StatusOr<std::vector<ReportRecord>> ListReports(int64_t round_id,
                                                        ReportFilter filter) override;
  absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> GetReportStates(
      absl::Span<const std::string> report_ids) override;
  absl::StatusOr<std::vector<ReportRecord>> ListReportStates(int64_t round_id,
                                                             ReportFilter filter) override;
  absl::Status SaveAccumulator(int64_t round_id, absl::string_view bytes,
                               absl::Span<const std::string> newly_counted) override;
  absl::Status CommitBatch(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> accept_and_count,
                           absl::Span<const std::string> reject) override;
  absl::Status CommitDecisions(int64_t round_id, absl::Span<const std::string> accept,
                               absl::Span<const std::string> reject) override;
  absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t round_id) override;

 private:
  explicit SqliteReportStore(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  absl::Status Migrate();
  absl::StatusOr<RoundRecord> GetRoundLocked(int64_t round_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RequireOpenLocked(int64_t round_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SaveAccumulator's transaction (arguments validated), which with
  // `release` also releases the round (CountAndRelease).
  absl::Status CountLocked(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> newly_counted, bool release)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ReportRecord> GetReportLocked(absl::string_view report_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<ReportRecord>> ListReportsImpl(int64_t round_id, ReportFilter filter,
                                                            bool with_share);
  absl::Status Transition(absl::string_view report_id, ReportState to);
  // Inserts one pending report; REQUIRES an open transaction and an open round.
  // `digest`: ShareDigest(share).
  absl::Status PutPendingLocked(int64_t round_id, absl::string_view report_id,
                                absl::string_view share, absl::string_view digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
  // Null without WAL (GetReportStates then reads through db_).
  absl::Mutex reader_mu_;
  std::unique_ptr<sqlite::Database> reader_ ABSL_GUARDED_BY(reader_mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_SQLITE_REPORT_STORE_H_
