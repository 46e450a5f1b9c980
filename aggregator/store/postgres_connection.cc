#include "aggregator/store/postgres_connection.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem::aggregator::pg {
namespace {

// Built-in type OIDs (stable across PostgreSQL versions: pg_type.dat).
constexpr uint32_t kBoolOid = 16;
constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kInt2Oid = 21;
constexpr uint32_t kInt4Oid = 23;
constexpr uint32_t kTextOid = 25;
constexpr uint32_t kByteaArrayOid = 1001;

void PutBigEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBigEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void IgnoreNotice(void*, const char*) {}  // "relation already exists, skipping" etc.

absl::Status DamagedColumn(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("report store: corrupt column (", what, ")"));
}

}  // namespace

Param Param::Int8(int64_t v) {
  std::string b;
  PutBigEndian(b, static_cast<uint64_t>(v), 8);
  return Param(kInt8Oid, std::move(b));
}

Param Param::Bytea(absl::string_view bytes) { return Param(kByteaOid, bytes); }

Param Param::Text(absl::string_view text) { return Param(kTextOid, text); }

Param Param::ByteaArray(absl::Span<const std::string> items) {
  // Binary array format: ndim, has-nulls flag, element type, then per
  // dimension (length, lower bound), then (length, bytes) per element.
  std::string b;
  size_t total = 20;
  for (const std::string& s : items) total += 4 + s.size();
  b.reserve(total);
  PutBigEndian(b, 1, 4);
  PutBigEndian(b, 0, 4);
  PutBigEndian(b, kByteaOid, 4);
  PutBigEndian(b, items.size(), 4);
  PutBigEndian(b, 1, 4);
  for (const std::string& s : items) {
    PutBigEndian(b, s.size(), 4);
    b.append(s);
  }
  return Param(kByteaArrayOid, std::move(b));
}

void Result::Deleter::operator()(PGresult* r) const { PQclear(r); }

Result::Result(PGresult* res) : res_(res) {}

int Result::rows() const { return PQntuples(res_.get()); }

int64_t Result::affected() const {
  const char* n = PQcmdTuples(res_.get());
  return n == nullptr || *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

std::string Result::command() const { return PQcmdStatus(res_.get()); }

bool Result::IsNull(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }

absl::StatusOr<int64_t> Result::Int(int row, int col) const {
  if (IsNull(row, col)) return DamagedColumn("NULL integer");
  const uint32_t type = PQftype(res_.get(), col);
  const int len = PQgetlength(res_.get(), row, col);
  const char* p = PQgetvalue(res_.get(), row, col);
  if (type == kInt8Oid && len == 8) return static_cast<int64_t>(GetBigEndian(p, 8));
  if (type == kInt4Oid && len == 4) return static_cast<int32_t>(GetBigEndian(p, 4));
  if (type == kInt2Oid && len == 2) return static_cast<int16_t>(GetBigEndian(p, 2));
  return DamagedColumn("integer type");
}

absl::StatusOr<bool> Result::Bool(int row, int col) const {
  if (IsNull(row, col) || PQftype(res_.get(), col) != kBoolOid ||
      PQgetlength(res_.get(), row, col) != 1) {
    return DamagedColumn("boolean");
  }
  return PQgetvalue(res_.get(), row, col)[0] != 0;
}

std::string Result::Bytes(int row, int col) const {
  if (IsNull(row, col)) return "";
  return std::string(PQgetvalue(res_.get(), row, col), PQgetlength(res_.get(), row, col));
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& conninfo,
                                                             const std::string& application_name) {
  // Later keywords override earlier ones, so the caller's conninfo (expanded
  // from "dbname") wins over these defaults.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", application_name.c_str(), conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("postgres: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg(absl::StripTrailingAsciiWhitespace(PQerrorMessage(conn)));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("postgres: cannot connect: ", msg));
  }
  PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);
  return std::unique_ptr<Connection>(new Connection(conn));
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }

bool Connection::idle() const { return PQtransactionStatus(conn_) == PQTRANS_IDLE; }

absl::Status Connection::ErrorFrom(absl::string_view what, PGresult* res) {
  const char* state = res == nullptr ? nullptr : PQresultErrorField(res, PG_DIAG_SQLSTATE);
  const char* primary = res == nullptr ? nullptr : PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  const std::string code = state == nullptr ? "" : state;
  // Without a server message the failure is libpq's own (connection lost).
  const std::string msg(
      absl::StripTrailingAsciiWhitespace(primary != nullptr ? primary : PQerrorMessage(conn_)));
  const std::string text = absl::StrCat(
      "postgres: ", what, " failed: ", code.empty() ? "" : absl::StrCat("[", code, "] "), msg);
  const bool connection_lost = code.empty() || absl::StartsWith(code, "08") || code == "57P01" ||
                               code == "57P02" || code == "57P03" ||
                               PQstatus(conn_) != CONNECTION_OK;
  if (connection_lost) {
    broken_ = true;
    return absl::UnavailableError(text);
  }
  if (code == "57014" || code == "40001" || code == "40P01" || code == "55P03" ||
      absl::StartsWith(code, "53")) {
    return absl::UnavailableError(text);
  }
  if (code == "23505") return absl::AlreadyExistsError(text);
  if (code == "23503") return absl::NotFoundError(text);
  if (absl::StartsWith(code, "23")) return absl::FailedPreconditionError(text);
  return absl::InternalError(text);
}

absl::StatusOr<Result> Connection::Exec(absl::string_view what, absl::string_view sql,
                                        std::initializer_list<Param> params) {
  if (broken_) return absl::UnavailableError("postgres: connection lost");
  std::vector<unsigned int> types;
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const Param& p : params) {
    types.push_back(p.type());
    values.push_back(p.data().data());
    lengths.push_back(static_cast<int>(p.data().size()));
    formats.push_back(1);
  }
  // Each statement text is parsed and planned once per connection: the
  // store's statements are a fixed set, run thousands of times a second.
  // (Prepared statements belong to the session, not to the transaction, so
  // one prepared inside a transaction that rolls back stays usable.)
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    const std::string name = absl::StrCat("tandem_", prepared_.size() + 1);
    const std::string query(sql);
    PGresult* prep =
        PQprepare(conn_, name.c_str(), query.c_str(), static_cast<int>(types.size()), types.data());
    const ExecStatusType pst = prep == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(prep);
    if (pst != PGRES_COMMAND_OK) {
      absl::Status error = ErrorFrom(what, prep);
      PQclear(prep);
      return error;
    }
    PQclear(prep);
    it = prepared_.emplace(std::string(sql), name).first;
  }
  PGresult* res = PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                                 values.data(), lengths.data(), formats.data(),
                                 /*resultFormat=*/1);
  const ExecStatusType st = res == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Result(res);
  absl::Status error = ErrorFrom(what, res);
  PQclear(res);
  return error;
}

absl::Status Connection::Command(absl::string_view what, absl::string_view sql) {
  if (broken_) return absl::UnavailableError("postgres: connection lost");
  const std::string query(sql);
  PGresult* res = PQexec(conn_, query.c_str());
  const ExecStatusType st = res == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(res);
  absl::Status out =
      st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? absl::OkStatus() : ErrorFrom(what, res);
  PQclear(res);
  return out;
}

absl::StatusOr<Transaction> Transaction::Begin(Connection* conn) {
  if (absl::Status s = conn->Command("BEGIN", "BEGIN ISOLATION LEVEL READ COMMITTED"); !s.ok()) {
    return s;
  }
  return Transaction(conn);
}

Transaction::~Transaction() {
  if (conn_ == nullptr || conn_->broken()) return;
  // A failed ROLLBACK marks the connection broken; it is then replaced.
  (void)conn_->Command("ROLLBACK", "ROLLBACK");
}

absl::Status Transaction::Commit() {
  Connection* conn = conn_;
  conn_ = nullptr;
  if (conn == nullptr) return absl::FailedPreconditionError("transaction already finished");
  absl::StatusOr<Result> r = conn->Exec("COMMIT", "COMMIT");
  if (!r.ok()) return r.status();
  // COMMIT of an aborted transaction answers ROLLBACK.
  if (r->command() != "COMMIT") {
    return absl::InternalError(absl::StrCat("postgres: COMMIT answered ", r->command()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator::pg
