// A throwaway PostgreSQL server for tests: initdb into a fresh temporary
// directory, a postmaster listening on 127.0.0.1 only (a free port picked by
// binding port 0 first) with its unix socket inside that directory, trust
// authentication for the superuser "tandem", and one database "tandem_test".
// Server settings are PostgreSQL's defaults (fsync on). initdb runs once per
// user, binary and flags: its result is kept in $TMPDIR (or /tmp) as
// tandem_pg_template_<uid>_<hash> (about 40 MB, mode 0700) and copied for
// each server.
//
// PostgreSQL refuses to run as root: when geteuid() == 0 the server runs
// as the `postgres` system user (created by Debian's postgresql-15 package)
// and the temporary directory is handed to it. The binaries are looked for
// in $TANDEM_POSTGRES_BINDIR, then in the directory CMake found at configure
// time, then in /usr/lib/postgresql/15/bin.
//
// The postmaster is a child of the test process with a parent-death signal
// (SIGINT: fast shutdown), so a killed test binary leaves no server behind
// (its temporary directory may stay). Start, Stop and Restart must be called
// from the same thread (the parent-death signal follows the thread that
// started the server). The destructor stops the server (immediate
// shutdown: no checkpoint) and removes the directory. Not thread-safe.
#ifndef TANDEM_AGGREGATOR_STORE_TESTING_POSTGRES_SERVER_H_
#define TANDEM_AGGREGATOR_STORE_TESTING_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::aggregator::testing {

// "<prefix>_<n>" with n counting up in this process: a name for a task or a
// database (CreateDatabase) that no other test of the binary uses. Keep the
// prefix under 50 bytes (PostgreSQL names: 63). Thread-safe.
std::string UniqueName(absl::string_view prefix);

class PostgresServer {
 public:
  // initdb, start, CREATE DATABASE tandem_test. UNAVAILABLE when the
  // binaries are missing or the server does not come up (the message quotes
  // the server log's tail).
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();

  // One server shared by the whole test binary, started on first use and
  // stopped at exit; every later call returns the first call's answer.
  static absl::StatusOr<PostgresServer*> Shared();

  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // libpq connection string of the test database (TCP on 127.0.0.1).
  std::string conninfo() const { return ConninfoFor("tandem_test"); }
  std::string ConninfoFor(absl::string_view database) const;
  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

  // CREATE DATABASE "name" (letters, digits and '_', case kept); returns its
  // conninfo.
  absl::StatusOr<std::string> CreateDatabase(absl::string_view name);
  // Runs one SQL command on `database` through a fresh connection; returns
  // the first column of the first row ("" when none).
  absl::StatusOr<std::string> Query(absl::string_view sql,
                                    absl::string_view database = "tandem_test") const;

  // Fast shutdown (clients are disconnected), waits for the exit.
  absl::Status Stop();
  // A server crash: SIGKILL to the postmaster (no shutdown checkpoint; its
  // backends exit when they notice). Restart then runs crash recovery.
  absl::Status Crash();
  // Starts the stopped server again on the same port and data directory.
  absl::Status Restart();

 private:
  PostgresServer() = default;
  absl::Status InitDb();
  absl::Status Launch();
  // Runs `argv` (argv[0] a path) as the server's user; stdout and stderr go
  // to `log`. Returns its exit status; INTERNAL when it is not 0.
  absl::Status RunTool(const std::vector<std::string>& argv, const std::string& log) const;
  std::string LogTail() const;

  std::string bindir_;
  std::string dir_;  // temporary directory: data/, sockets, logs
  int port_ = 0;
  pid_t pid_ = -1;
  uid_t run_uid_ = 0;  // the server's user when the test runs as root
  gid_t run_gid_ = 0;
  bool drop_privileges_ = false;
};

}  // namespace tandem::aggregator::testing

#endif  // TANDEM_AGGREGATOR_STORE_TESTING_POSTGRES_SERVER_H_
