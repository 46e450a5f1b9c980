// ReportStore that keeps share bytes out of SQLite: shares go to append-only
// segment files (segment_file.h), everything else -- rounds, report states,
// digests, accumulators, secrets and, per live share, its (segment, offset,
// length) -- to an SQLite index in the same directory:
//
//   <dir>/index.sqlite     the index (WAL, synchronous as in the options)
//   <dir>/segments/*.seg   the shares
//   <dir>/accumulators/*.seg  the accumulator snapshots (the index names the
//                          latest of each round, so SQLite never holds the
//                          megabytes of an accumulator either)
//   <dir>/LOCK             flock'ed by the one process that has it open
//
// Durability (the crash invariant of report_store.h): PutPending(Batch)
// appends the batch's shares, fdatasyncs the segment once, and only then
// commits the index rows in one transaction, so an acknowledged report's
// share is on disk before anything names it; a crash in between leaves
// unindexed bytes that nothing reads. The store's lock is not held while
// the segment is written and synced (only the checks before and the short
// index commit after), so state reads and the verification's commits do
// not queue behind an upload group's fsync. Counting or rejecting a report only
// clears its location in the index (in the same transaction as the state
// change); a segment no index row names any more is deleted after that
// commit (never the segment being appended to). Reopening never appends to
// an old segment. With synchronous below FULL the segments are not synced
// either (durable across process crashes, not power loss), like SQLite.
// Space: a segment is freed whole, so one long-pending share keeps its
// segment (max_segment_bytes) alive; segments are never compacted, and each
// dropping commit checks every inactive segment (one indexed query each).
//
// Every location read from the index is validated, and every record read is
// checked against its header (magic, length, the tag naming its owner: the
// share digest's prefix or the round id) and its CRC-32C: DATA_LOSS on any
// mismatch, a short segment or a missing one. (The full SHA-256 of a share
// is computed once, at PutPending, for the digest the contract stores.)
//
// Thread safety: thread-safe; one SQLite connection and the segment files
// guarded by one mutex. The state reads that need no share (GetReportStates,
// ListReportStates: an upload's duplicate check, the verification's
// bookkeeping) go through a second, read-only connection under its own
// mutex, so they see the last committed index without waiting for a group
// commit's fsyncs (WAL readers do not block on the writer). One process at
// a time (FAILED_PRECONDITION when the directory is locked by another).
#ifndef TANDEM_AGGREGATOR_STORE_SEGMENT_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_SEGMENT_REPORT_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/store/report_store.h"
#include "aggregator/store/segment_file.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

struct SegmentStoreOptions {
  sqlite::DatabaseOptions sqlite;  // For the index; synchronous also governs the segments.
  int64_t max_segment_bytes = SegmentFiles::kDefaultMaxSegmentBytes;
};

class SegmentReportStore : public ReportStore {
 public:
  static constexpr int64_t kSchemaVersion = 1;

  // Opens or creates the store in directory `dir`. Errors of
  // sqlite::Database::Open, DATA_LOSS for a damaged schema_version table,
  // FAILED_PRECONDITION for a newer schema or a directory locked by another
  // process.
  static absl::StatusOr<std::unique_ptr<SegmentReportStore>> Open(
      const std::string& dir, const SegmentStoreOptions& options = {});
  ~SegmentReportStore() override;

  absl::Status OpenRound(int64_t round_id, absl::string_view parameters) override;
  absl::Status CloseRound(int64_t round_id) override;
  absl::Status ReleaseRound(int64_t round_id, absl::string_view bytes) override;
  // One transaction: ReleaseRound's, with newly_counted's transitions.
  absl::Status CountAndRelease(int64_t round_id, absl::string_view counted,
                               absl::Span<const std::string> newly_counted,
                               absl::string_view released) override;
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
  SegmentReportStore(std::unique_ptr<sqlite::Database> db, std::unique_ptr<SegmentFiles> files,
                     std::unique_ptr<SegmentFiles> accumulators, int lock_fd)
      : lock_fd_(lock_fd),
        db_(std::move(db)),
        files_(std::move(files)),
        accumulators_(std::move(accumulators)) {}
  absl::Status Migrate();
  absl::StatusOr<RoundRecord> GetRoundLocked(int64_t round_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RequireOpenLocked(int64_t round_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ReportRecord> GetReportLocked(absl::string_view report_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decodes one reports row (kReportColumns) and reads its share.
  absl::StatusOr<ReportRecord> ReadReportLocked(const sqlite::Statement& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Transition(absl::string_view report_id, ReportState to);
  // A report new to the store, its share buffered in files_ (PutPendingBatch).
  struct NewReport {
    std::string report_id;
    std::string digest;
    ShareLocation loc;
  };
  // Checks one upload (`digest`: its share's) of a PutPendingBatch against the index and the
  // batch's earlier ones (`batch_digests`, by id): OK for an identical
  // repeat, ALREADY_EXISTS for another share or round under the id,
  // INVALID_ARGUMENT for a malformed one; a new report's share is buffered
  // and its row added to `rows`. REQUIRES upload_mu_ (no other inserter).
  absl::Status CheckNewLocked(int64_t round_id, absl::string_view report_id,
                              absl::string_view share, std::string digest,
                              absl::flat_hash_map<std::string, std::string>* batch_digests,
                              std::vector<NewReport>* rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Buffers the accumulator snapshot and points the round's row at it
  // (adding `newly_counted` to its report count); REQUIRES a transaction.
  absl::Status WriteAccumulatorLocked(int64_t round_id, absl::string_view bytes,
                                      int64_t newly_counted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops records buffered by a call that fails before its commit.
  void DiscardLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Syncs the buffered records (shares, snapshots), then commits `tx` (the ack point).
  absl::Status CommitWithSharesLocked(sqlite::Transaction& tx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes inactive segments that no index row names (best effort).
  void ReclaimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SaveAccumulator's transaction (arguments validated), which with
  // `release` also releases the round (CountAndRelease).
  absl::Status CountLocked(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> newly_counted, bool release)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int lock_fd_;
  // Serialises the uploads' PutPendingBatch (held around mu_, never inside it).
  absl::Mutex upload_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The read-only connection of the *States calls (never held with mu_).
  absl::Mutex reader_mu_;
  std::unique_ptr<sqlite::Database> reader_ ABSL_GUARDED_BY(reader_mu_);
  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SegmentFiles> files_ ABSL_GUARDED_BY(mu_);         // Shares.
  std::unique_ptr<SegmentFiles> accumulators_ ABSL_GUARDED_BY(mu_);  // Snapshots.
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_SEGMENT_REPORT_STORE_H_
