// A small RAII wrapper over sqlite3 for tandem's embedded daemon state.
//
//   TANDEM_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path, {}));
//   TANDEM_RETURN_IF_ERROR(db->Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)"));
//   TANDEM_ASSIGN_OR_RETURN(auto tx, sqlite::Transaction::Begin(db.get()));
//   TANDEM_ASSIGN_OR_RETURN(auto st, db->Prepare("INSERT INTO t VALUES (?1, ?2)"));
//   TANDEM_RETURN_IF_ERROR(st.BindInt64(1, 7));
//   TANDEM_RETURN_IF_ERROR(st.BindBlob(2, bytes));
//   TANDEM_RETURN_IF_ERROR(st.StepDone());
//   TANDEM_RETURN_IF_ERROR(tx.Commit());
//
// Durability: by default the database runs in WAL mode with synchronous=FULL,
// so a committed transaction survives SIGKILL and power loss (each commit
// fsyncs the WAL).
//
// Thread safety: a Database is one sqlite3 connection and is NOT thread-safe;
// use one connection per thread, or guard every use of a Database and its
// Statements/Transactions with one external mutex. Several connections (or
// processes) may open the same file; writers serialize on the busy timeout.
//
// Error mapping (every sqlite error carries sqlite's own message):
//   SQLITE_BUSY, SQLITE_LOCKED          -> UNAVAILABLE (retryable)
//   SQLITE_CONSTRAINT_{UNIQUE,PRIMARYKEY} -> ALREADY_EXISTS
//   other SQLITE_CONSTRAINT            -> FAILED_PRECONDITION
//   SQLITE_CORRUPT, SQLITE_NOTADB      -> DATA_LOSS
//   SQLITE_CANTOPEN                    -> NOT_FOUND
//   SQLITE_FULL                        -> RESOURCE_EXHAUSTED
//   SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH -> PERMISSION_DENIED
//   SQLITE_RANGE, SQLITE_MISMATCH, SQLITE_TOOBIG, SQLITE_ERROR -> INVALID_ARGUMENT
//   anything else (SQLITE_IOERR, SQLITE_NOMEM, ...) -> INTERNAL
#ifndef TANDEM_BASE_SQLITE_DATABASE_H_
#define TANDEM_BASE_SQLITE_DATABASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tandem::sqlite {

// Maps an sqlite3 result code (primary or extended) to an absl status code.
absl::StatusCode StatusCodeFromSqlite(int sqlite_code);

enum class Synchronous { kOff = 0, kNormal = 1, kFull = 2, kExtra = 3 };

struct DatabaseOptions {
  // Create the file when it does not exist (otherwise NOT_FOUND).
  bool create_if_missing = true;
  // Write-ahead logging (journal_mode=WAL). Off means the rollback journal.
  bool wal = true;
  // PRAGMA synchronous. kFull fsyncs at every commit (durable across power
  // loss); kNormal in WAL mode is durable across process crashes only.
  Synchronous synchronous = Synchronous::kFull;
  // How long a statement waits for a lock held by another connection, in
  // milliseconds, before failing with UNAVAILABLE.
  int busy_timeout_ms = 5000;
  // PRAGMA foreign_keys.
  bool foreign_keys = true;
};

class Database;
class CachedStatement;

// One prepared statement. Move-only; finalized on destruction. Must not
// outlive the Database that prepared it. Bind indexes are 1-based and column
// indexes 0-based, as in sqlite. Not thread-safe (see the file comment).
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds return INVALID_ARGUMENT for an index out of range. Text and blob
  // contents are copied by sqlite (SQLITE_TRANSIENT), so the caller's buffer
  // may be released afterwards.
  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindDouble(int index, double value);
  absl::Status BindText(int index, absl::string_view value);
  absl::Status BindBlob(int index, absl::Span<const uint8_t> value);
  absl::Status BindBlob(int index, absl::string_view value);
  absl::Status BindNull(int index);

  // Advances the statement. Returns true when a row is available, false
  // when the statement is done, or the mapped sqlite error.
  absl::StatusOr<bool> Step();
  // Step() that must finish without producing a row (INSERT/UPDATE/DELETE).
  // Returns INTERNAL when a row comes back.
  absl::Status StepDone();
  // Resets the statement for re-execution and clears all bindings.
  absl::Status Reset();

  // Column reads of the current row (valid only after Step() returned true).
  // Out-of-range indexes read as NULL (0, 0.0, empty).
  int ColumnCount() const;
  bool ColumnIsNull(int column) const;
  int64_t ColumnInt64(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  // Blob bytes as a string (owning copy).
  std::string ColumnBlob(int column) const;

 private:
  friend class Database;
  friend class CachedStatement;
  Statement(Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  absl::Status CheckBind(int rc, int index);

  Database* db_ = nullptr;       // Not owned.
  sqlite3_stmt* stmt_ = nullptr;  // Owned.
};

// One sqlite3 connection. Created by Open(); closed on destruction. Not
// thread-safe (see the file comment).
class Database {
 public:
  // Opens (or creates) the database file at `path` and applies `options`.
  // Returns INVALID_ARGUMENT for an empty path or a negative busy timeout,
  // NOT_FOUND when the file is missing and create_if_missing is false,
  // DATA_LOSS when the file is not a database, or another mapped error.
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const DatabaseOptions& options);
  // A second, query-only connection to the existing file at `path` (never
  // created), with `options` otherwise: in WAL mode it reads the last
  // committed state while another connection writes. Open's errors (NOT_FOUND
  // for a missing file); a write through it fails (SQLITE_READONLY).
  static absl::StatusOr<std::unique_ptr<Database>> OpenQueryOnly(const std::string& path,
                                                                 DatabaseOptions options);

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more SQL statements that return no rows of interest.
  absl::Status Exec(absl::string_view sql);
  // Compiles exactly one statement. Returns INVALID_ARGUMENT for a syntax
  // error or trailing SQL after the first statement.
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  // Prepare() compiled once per connection: the statement is kept by the
  // Database, keyed by its text, and handed out reset with no bindings.
  // For the statements a daemon runs per request (sqlite's parser and
  // planner cost more than a point lookup). The handle resets the statement
  // when it goes, so an unfinished SELECT never holds its read snapshot
  // open. A text whose cached statement is in use (nested use) gets a fresh
  // uncached one. Errors as Prepare().
  absl::StatusOr<CachedStatement> PrepareCached(absl::string_view sql);
  // One statement that returns no row (BEGIN, COMMIT, ...) through
  // PrepareCached. Errors as Exec(); INTERNAL when a row comes back.
  absl::Status ExecCached(absl::string_view sql);

  // Rows changed by the most recent INSERT/UPDATE/DELETE on this connection.
  int64_t ChangedRows() const;
  bool InTransaction() const;
  const std::string& path() const { return path_; }

  // Builds a status from the connection's last error, prefixed by `what`.
  absl::Status ErrorStatus(int rc, absl::string_view what) const;

 private:
  friend class CachedStatement;
  struct CacheEntry {
    Statement statement;
    bool in_use = false;
  };
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;  // Owned.
  std::string path_;
  // PrepareCached's statements, finalized before the connection closes.
  absl::flat_hash_map<std::string, std::unique_ptr<CacheEntry>> cache_;
};

// A statement from Database::PrepareCached: use it as a Statement through
// -> and *. Move-only; must not outlive its Database. On destruction the
// statement is reset, its bindings cleared and (when cached) handed back.
class CachedStatement {
 public:
  CachedStatement(CachedStatement&& other) noexcept;
  CachedStatement& operator=(CachedStatement&&) = delete;
  CachedStatement(const CachedStatement&) = delete;
  CachedStatement& operator=(const CachedStatement&) = delete;
  ~CachedStatement();

  Statement* operator->() { return statement_; }
  Statement& operator*() { return *statement_; }

 private:
  friend class Database;
  // Borrows `entry`'s statement (marked in use), or owns `fresh`.
  explicit CachedStatement(Database::CacheEntry* entry);
  explicit CachedStatement(Statement fresh);

  Database::CacheEntry* entry_ = nullptr;  // Not owned; null when owning.
  std::unique_ptr<Statement> owned_;
  Statement* statement_ = nullptr;  // entry_'s or owned_'s.
};

enum class TransactionMode { kDeferred, kImmediate, kExclusive };

// RAII transaction: BEGIN on Begin(), COMMIT on Commit(), ROLLBACK in the
// destructor when Commit() was not called or failed. Move-only; must not
// outlive its Database. Transactions do not nest (sqlite has no nested BEGIN).
class Transaction {
 public:
  // Returns FAILED_PRECONDITION when `db` is already in a transaction,
  // INVALID_ARGUMENT for a null db, UNAVAILABLE when the lock is busy.
  static absl::StatusOr<Transaction> Begin(
      Database* db, TransactionMode mode = TransactionMode::kImmediate);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&& other) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Returns FAILED_PRECONDITION when already finished; on a failed COMMIT
  // the transaction is rolled back and the mapped error returned.
  absl::Status Commit();
  // Explicit rollback; FAILED_PRECONDITION when already finished.
  absl::Status Rollback();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;  // Not owned; null once finished.
};

}  // namespace tandem::sqlite

#endif  // TANDEM_BASE_SQLITE_DATABASE_H_
