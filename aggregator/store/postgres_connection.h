// A thin layer over one libpq connection for PostgresReportStore: every
// parameter and every result column travels in binary format (shares and
// secrets are never escaped into SQL text nor logged), and server errors
// become absl::Status codes:
//
//   connection lost, server shutting down or restarting (SQLSTATE class 08,
//   57P01-57P03), query cancelled (57014), serialization failure / deadlock
//   (40001, 40P01), lock not available (55P03), insufficient resources
//   (class 53)                                  -> UNAVAILABLE (retryable)
//   unique violation (23505)                    -> ALREADY_EXISTS
//   foreign key violation (23503)               -> NOT_FOUND
//   other integrity violations (class 23)       -> FAILED_PRECONDITION
//   anything else                               -> INTERNAL
//
// Messages carry the SQLSTATE and the server's primary message, never the
// DETAIL (which may quote values). After a connection-level failure the
// connection reports broken() and the owner opens a new one.
//
// Thread-compatible: the owner serializes calls.
#ifndef TANDEM_AGGREGATOR_STORE_POSTGRES_CONNECTION_H_
#define TANDEM_AGGREGATOR_STORE_POSTGRES_CONNECTION_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace tandem::aggregator::pg {

// One query parameter in binary format with its type OID. Bytea and Text
// parameters reference the caller's bytes (which must outlive the call).
class Param {
 public:
  static Param Int8(int64_t v);
  static Param Bytea(absl::string_view bytes);
  static Param Text(absl::string_view text);
  // A one-dimensional bytea[] (for "= ANY($n)").
  static Param ByteaArray(absl::Span<const std::string> items);

  uint32_t type() const { return type_; }
  absl::string_view data() const { return owned_ ? absl::string_view(buffer_) : view_; }

 private:
  Param(uint32_t type, absl::string_view view) : type_(type), view_(view) {}
  Param(uint32_t type, std::string buffer)
      : type_(type), buffer_(std::move(buffer)), owned_(true) {}
  uint32_t type_;
  absl::string_view view_;
  std::string buffer_;
  bool owned_ = false;
};

// A query's result (binary columns). Accessors return DATA_LOSS for a
// column of an unexpected type or size.
class Result {
 public:
  explicit Result(PGresult* res);
  int rows() const;
  // Rows changed by an INSERT/UPDATE/DELETE.
  int64_t affected() const;
  // The command tag ("COMMIT", "INSERT 0 1", ...).
  std::string command() const;
  bool IsNull(int row, int col) const;
  absl::StatusOr<int64_t> Int(int row, int col) const;  // int2, int4 or int8
  absl::StatusOr<bool> Bool(int row, int col) const;
  std::string Bytes(int row, int col) const;  // bytea or text ("" for NULL)

 private:
  struct Deleter {
    void operator()(PGresult* r) const;
  };
  std::unique_ptr<PGresult, Deleter> res_;
};

class Connection {
 public:
  // Connects (libpq conninfo string or URI; connect_timeout defaults to 10
  // seconds). UNAVAILABLE when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const std::string& conninfo,
                                                          const std::string& application_name);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement (prepared on first use, then reused by its text).
  // `what` names it in error messages.
  absl::StatusOr<Result> Exec(absl::string_view what, absl::string_view sql,
                              std::initializer_list<Param> params = {});
  // Runs statements without parameters (BEGIN, ROLLBACK, DDL; several may
  // be separated by ';').
  absl::Status Command(absl::string_view what, absl::string_view sql);

  // True once the connection failed: the owner must open a new one.
  bool broken() const;
  // True when no transaction is open.
  bool idle() const;

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  absl::Status ErrorFrom(absl::string_view what, PGresult* res);

  PGconn* conn_;
  bool broken_ = false;
  // Statement text -> name of its prepared statement on this session.
  absl::flat_hash_map<std::string, std::string> prepared_;
};

// BEGIN ... COMMIT; the destructor rolls back a transaction that was not
// committed. Commit is acknowledged only once COMMIT returned.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Connection* conn);
  Transaction(Transaction&& other) noexcept : conn_(other.conn_) { other.conn_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;  // null once committed or rolled back
};

}  // namespace tandem::aggregator::pg

#endif  // TANDEM_AGGREGATOR_STORE_POSTGRES_CONNECTION_H_
