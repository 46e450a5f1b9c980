// SegmentReportStore, part 1: opening (lock, index schema, segment sets)
// and the round-level calls. Reports and accumulators: segment_report_store.cc.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "aggregator/store/segment_report_store.h"
#include "aggregator/store/sqlite_rounds.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

using sqlite::CachedStatement;
using sqlite::Statement;
using sqlite::Transaction;

// Version 1. A report's share location (seg, off, len) is set exactly while
// it is pending or accepted-uncounted, as SqliteReportStore's share column.
// An accumulator row names its latest snapshot in the accumulator segments.
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
  seg          INTEGER,
  off          INTEGER,
  len          INTEGER);
CREATE INDEX IF NOT EXISTS reports_by_round ON reports(round_id, state, counted);
CREATE INDEX IF NOT EXISTS reports_by_segment ON reports(seg) WHERE seg IS NOT NULL;
CREATE TABLE IF NOT EXISTS accumulators (
  round_id     INTEGER PRIMARY KEY REFERENCES rounds(round_id),
  seg          INTEGER NOT NULL,
  off          INTEGER NOT NULL,
  len          INTEGER NOT NULL,
  report_count INTEGER NOT NULL,
  version      INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS round_secrets (
  round_id INTEGER PRIMARY KEY REFERENCES rounds(round_id),
  secret   BLOB NOT NULL);
)sql";

constexpr absl::string_view kComponent = "segment_report_store";


}  // namespace

absl::StatusOr<std::unique_ptr<SegmentReportStore>> SegmentReportStore::Open(
    const std::string& dir, const SegmentStoreOptions& options) {
  if (dir.empty()) return absl::InvalidArgumentError("segment store: empty directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("segment store: create ", dir, ": ", ec.message()));
  const std::string lock_path = dir + "/LOCK";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::InternalError(
        absl::StrCat("segment store: open ", lock_path, ": ", std::strerror(errno)));
  }
  absl::Cleanup close_lock = [lock_fd] { close(lock_fd); };
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment store: ", dir, " is in use by another process"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(dir + "/index.sqlite", options.sqlite));
  const bool sync = options.sqlite.synchronous >= sqlite::Synchronous::kFull;
  TANDEM_ASSIGN_OR_RETURN(
      auto files,
      SegmentFiles::Open(dir + "/segments", options.max_segment_bytes, sync, kMaxShareBytes));
  TANDEM_ASSIGN_OR_RETURN(auto accumulators,
                          SegmentFiles::Open(dir + "/accumulators", options.max_segment_bytes, sync,
                                             kMaxAccumulatorBytes));
  std::move(close_lock).Cancel();
  std::unique_ptr<SegmentReportStore> store(
      new SegmentReportStore(std::move(db), std::move(files), std::move(accumulators), lock_fd));
  TANDEM_RETURN_IF_ERROR(store->Migrate());
  {
    TANDEM_ASSIGN_OR_RETURN(auto db,
                            sqlite::Database::OpenQueryOnly(dir + "/index.sqlite", options.sqlite));
    absl::MutexLock lock(&store->reader_mu_);
    store->reader_ = std::move(db);
  }
  absl::MutexLock lock(&store->mu_);
  store->ReclaimLocked();  // Segments emptied before a crash.
  return store;
}

SegmentReportStore::~SegmentReportStore() {
  {
    absl::MutexLock lock(&reader_mu_);
    reader_.reset();
  }
  {
    absl::MutexLock lock(&mu_);
    files_.reset();
    accumulators_.reset();
    db_.reset();
  }
  close(lock_fd_);  // Releases the flock.
}

absl::Status SegmentReportStore::Migrate() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  TANDEM_RETURN_IF_ERROR(
      db_->Exec("CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version "
                "INTEGER NOT NULL)"));
  // Run once at open: compiled for this call only, not kept.
  TANDEM_ASSIGN_OR_RETURN(
      Statement get,
      db_->Prepare(
          absl::StrCat("SELECT version FROM schema_version WHERE component = '", kComponent, "'")));
  TANDEM_ASSIGN_OR_RETURN(const bool has_row, get.Step());
  if (has_row) {
    const int64_t version = get.ColumnInt64(0);
    if (version < 1) return CorruptStore("schema_version");
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("segment store: schema version ", version,
                                                        " is newer than this binary's ",
                                                        kSchemaVersion));
    }
  } else {
    TANDEM_RETURN_IF_ERROR(db_->Exec(kSchemaV1));
    TANDEM_RETURN_IF_ERROR(db_->Exec(absl::StrCat("INSERT INTO schema_version VALUES ('",
                                                  kComponent, "', ", kSchemaVersion, ")")));
  }
  return tx.Commit();
}

absl::StatusOr<RoundRecord> SegmentReportStore::GetRoundLocked(int64_t round_id) {
  return ReadRoundRow(*db_, round_id);
}

absl::StatusOr<std::vector<RoundRecord>> SegmentReportStore::ListRounds() {
  absl::MutexLock lock(&mu_);
  return ReadAllRounds(*db_);
}

absl::Status SegmentReportStore::RequireOpenLocked(int64_t round_id) {
  return RequireOpenRound(*db_, round_id);
}

absl::Status SegmentReportStore::OpenRound(int64_t round_id, absl::string_view parameters) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateParameters(parameters));
  absl::MutexLock lock(&mu_);
  return OpenRoundRow(*db_, round_id, parameters);
}

absl::Status SegmentReportStore::CloseRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return CloseRoundRow(*db_, round_id);
}

absl::Status SegmentReportStore::ReleaseRound(int64_t round_id, absl::string_view bytes) {
  return CountAndRelease(round_id, bytes, {}, bytes);
}

absl::StatusOr<ReportCounts> SegmentReportStore::CountReports(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return CountReportRows(*db_, round_id);
}

absl::StatusOr<std::string> SegmentReportStore::BindRoundSecret(int64_t round_id, absl::string_view secret) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateRoundSecret(secret));
  absl::MutexLock lock(&mu_);
  return BindRoundSecretRow(*db_, round_id, secret);
}

absl::StatusOr<RoundRecord> SegmentReportStore::GetRound(int64_t round_id) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  absl::MutexLock lock(&mu_);
  return GetRoundLocked(round_id);
}

}  // namespace tandem::aggregator
