#include "base/sqlite/database.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::sqlite {

absl::StatusCode StatusCodeFromSqlite(int sqlite_code) {
  switch (sqlite_code) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::StatusCode::kOk;
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return absl::StatusCode::kAlreadyExists;
    default:
      break;
  }
  switch (sqlite_code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kNotFound;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_ERROR:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

namespace {

absl::Status MakeStatus(int rc, absl::string_view what, absl::string_view detail) {
  return absl::Status(StatusCodeFromSqlite(rc),
                      absl::StrCat("sqlite: ", what, ": ", detail, " (code ", rc, ")"));
}

}  // namespace

// ---------------------------------------------------------------- Statement

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

absl::Status Statement::CheckBind(int rc, int index) {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return db_->ErrorStatus(rc, absl::StrCat("bind parameter ", index));
}

absl::Status Statement::BindInt64(int index, int64_t value) {
  return CheckBind(sqlite3_bind_int64(stmt_, index, value), index);
}
absl::Status Statement::BindDouble(int index, double value) {
  return CheckBind(sqlite3_bind_double(stmt_, index, value), index);
}
absl::Status Statement::BindText(int index, absl::string_view value) {
  return CheckBind(sqlite3_bind_text64(stmt_, index, value.data(), value.size(),
                                       SQLITE_TRANSIENT, SQLITE_UTF8),
                   index);
}
absl::Status Statement::BindBlob(int index, absl::Span<const uint8_t> value) {
  // A zero-length blob must still be a blob, not NULL: pass a non-null pointer.
  static const uint8_t kEmpty = 0;
  const void* data = value.empty() ? &kEmpty : value.data();
  return CheckBind(
      sqlite3_bind_blob64(stmt_, index, data, value.size(), SQLITE_TRANSIENT), index);
}
absl::Status Statement::BindBlob(int index, absl::string_view value) {
  return BindBlob(index, absl::Span<const uint8_t>(
                             reinterpret_cast<const uint8_t*>(value.data()), value.size()));
}
absl::Status Statement::BindNull(int index) {
  return CheckBind(sqlite3_bind_null(stmt_, index), index);
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->ErrorStatus(rc, "step");
}

absl::Status Statement::StepDone() {
  TANDEM_ASSIGN_OR_RETURN(const bool row, Step());
  if (row) return absl::InternalError("sqlite: statement returned a row where none was expected");
  return absl::OkStatus();
}

absl::Status Statement::Reset() {
  // sqlite3_reset repeats the last step's error; that error was already
  // reported by Step(), so only the binding reset is checked here.
  sqlite3_reset(stmt_);
  const int rc = sqlite3_clear_bindings(stmt_);
  if (rc != SQLITE_OK) return db_->ErrorStatus(rc, "reset");
  return absl::OkStatus();
}

int Statement::ColumnCount() const { return sqlite3_data_count(stmt_); }
bool Statement::ColumnIsNull(int column) const {
  return column < 0 || column >= ColumnCount() ||
         sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
int64_t Statement::ColumnInt64(int column) const {
  if (column < 0 || column >= ColumnCount()) return 0;
  return sqlite3_column_int64(stmt_, column);
}
double Statement::ColumnDouble(int column) const {
  if (column < 0 || column >= ColumnCount()) return 0.0;
  return sqlite3_column_double(stmt_, column);
}
std::string Statement::ColumnText(int column) const {
  if (column < 0 || column >= ColumnCount()) return "";
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  if (text == nullptr || n <= 0) return "";
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n));
}
std::string Statement::ColumnBlob(int column) const {
  if (column < 0 || column >= ColumnCount()) return "";
  const void* blob = sqlite3_column_blob(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  if (blob == nullptr || n <= 0) return "";
  return std::string(static_cast<const char*>(blob), static_cast<size_t>(n));
}

// ----------------------------------------------------------------- Database

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const DatabaseOptions& options) {
  if (path.empty()) return absl::InvalidArgumentError("sqlite: empty database path");
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError("sqlite: busy_timeout_ms must be >= 0");
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (options.create_if_missing) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return MakeStatus(rc, absl::StrCat("open ", path), msg);
  }
  sqlite3_extended_result_codes(raw, 1);
  std::unique_ptr<Database> db(new Database(raw, path));
  TANDEM_RETURN_IF_ERROR(db->Exec(absl::StrCat("PRAGMA busy_timeout=", options.busy_timeout_ms)));
  if (options.wal) {
    // journal_mode returns a row with the resulting mode; check it took.
    TANDEM_ASSIGN_OR_RETURN(Statement st, db->Prepare("PRAGMA journal_mode=WAL"));
    TANDEM_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row || st.ColumnText(0) != "wal") {
      return absl::InternalError(
          absl::StrCat("sqlite: could not enable WAL on ", path, " (got '",
                       row ? st.ColumnText(0) : "", "')"));
    }
  }
  TANDEM_RETURN_IF_ERROR(
      db->Exec(absl::StrCat("PRAGMA synchronous=", static_cast<int>(options.synchronous))));
  TANDEM_RETURN_IF_ERROR(
      db->Exec(absl::StrCat("PRAGMA foreign_keys=", options.foreign_keys ? "ON" : "OFF")));
  // Reading the schema detects a non-database file early (DATA_LOSS).
  TANDEM_RETURN_IF_ERROR(db->Exec("SELECT count(*) FROM sqlite_master"));
  return db;
}

absl::StatusOr<std::unique_ptr<Database>> Database::OpenQueryOnly(const std::string& path,
                                                                  DatabaseOptions options) {
  options.create_if_missing = false;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Open(path, options));
  TANDEM_RETURN_IF_ERROR(db->Exec("PRAGMA query_only = ON"));
  return db;
}

Database::~Database() {
  cache_.clear();  // Finalizes the cached statements first.
  sqlite3_close_v2(db_);
}

absl::Status Database::ErrorStatus(int rc, absl::string_view what) const {
  return MakeStatus(rc, what, sqlite3_errmsg(db_));
}

absl::Status Database::Exec(absl::string_view sql) {
  const std::string owned(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  const std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return MakeStatus(sqlite3_extended_errcode(db_), "exec", msg);
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, &tail);
  if (rc != SQLITE_OK) return ErrorStatus(rc, "prepare");
  Statement st(this, stmt);
  if (stmt == nullptr) return absl::InvalidArgumentError("sqlite: prepare: empty statement");
  const absl::string_view rest(tail, static_cast<size_t>(sql.data() + sql.size() - tail));
  for (char c : rest) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r' && c != ';') {
      return absl::InvalidArgumentError("sqlite: prepare: more than one statement");
    }
  }
  return st;
}

absl::StatusOr<CachedStatement> Database::PrepareCached(absl::string_view sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) {
    if (!it->second->in_use) return CachedStatement(it->second.get());
    TANDEM_ASSIGN_OR_RETURN(Statement fresh, Prepare(sql));  // nested use
    return CachedStatement(std::move(fresh));
  }
  TANDEM_ASSIGN_OR_RETURN(Statement st, Prepare(sql));
  auto entry = std::make_unique<CacheEntry>(CacheEntry{std::move(st)});
  CacheEntry* raw = entry.get();
  cache_.emplace(std::string(sql), std::move(entry));
  return CachedStatement(raw);
}

absl::Status Database::ExecCached(absl::string_view sql) {
  TANDEM_ASSIGN_OR_RETURN(CachedStatement st, PrepareCached(sql));
  return st->StepDone();
}

// --------------------------------------------------------- CachedStatement

CachedStatement::CachedStatement(Database::CacheEntry* entry)
    : entry_(entry), statement_(&entry->statement) {
  entry_->in_use = true;
}

CachedStatement::CachedStatement(Statement fresh)
    : owned_(std::make_unique<Statement>(std::move(fresh))), statement_(owned_.get()) {}

CachedStatement::CachedStatement(CachedStatement&& other) noexcept
    : entry_(std::exchange(other.entry_, nullptr)),
      owned_(std::move(other.owned_)),
      statement_(std::exchange(other.statement_, nullptr)) {}

CachedStatement::~CachedStatement() {
  if (statement_ == nullptr) return;  // moved from
  // The last step's error was reported by Step(); a reset after it repeats
  // it, so it is not checked here.
  sqlite3_reset(statement_->stmt_);
  sqlite3_clear_bindings(statement_->stmt_);
  if (entry_ != nullptr) entry_->in_use = false;
}

int64_t Database::ChangedRows() const { return sqlite3_changes64(db_); }
bool Database::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

// -------------------------------------------------------------- Transaction

absl::StatusOr<Transaction> Transaction::Begin(Database* db, TransactionMode mode) {
  if (db == nullptr) return absl::InvalidArgumentError("sqlite: null database");
  if (db->InTransaction()) {
    return absl::FailedPreconditionError("sqlite: a transaction is already open");
  }
  const char* sql = mode == TransactionMode::kDeferred    ? "BEGIN DEFERRED"
                    : mode == TransactionMode::kImmediate ? "BEGIN IMMEDIATE"
                                                          : "BEGIN EXCLUSIVE";
  TANDEM_RETURN_IF_ERROR(db->ExecCached(sql));
  return Transaction(db);
}

Transaction::Transaction(Transaction&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  if (db_ != nullptr && db_->InTransaction()) db_->ExecCached("ROLLBACK").IgnoreError();
}

absl::Status Transaction::Commit() {
  if (db_ == nullptr) return absl::FailedPreconditionError("sqlite: transaction already finished");
  Database* db = std::exchange(db_, nullptr);
  absl::Status s = db->ExecCached("COMMIT");
  if (!s.ok() && db->InTransaction()) db->ExecCached("ROLLBACK").IgnoreError();
  return s;
}

absl::Status Transaction::Rollback() {
  if (db_ == nullptr) return absl::FailedPreconditionError("sqlite: transaction already finished");
  Database* db = std::exchange(db_, nullptr);
  if (!db->InTransaction()) return absl::OkStatus();  // sqlite already rolled back.
  return db->ExecCached("ROLLBACK");
}

}  // namespace tandem::sqlite
