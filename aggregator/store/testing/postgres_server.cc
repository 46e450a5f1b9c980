#include "aggregator/store/testing/postgres_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

#ifndef TANDEM_POSTGRES_BINDIR
#define TANDEM_POSTGRES_BINDIR "/usr/lib/postgresql/15/bin"
#endif

namespace tandem::aggregator::testing {

std::string UniqueName(absl::string_view prefix) {
  static std::atomic<int> n{0};
  return absl::StrCat(prefix, "_", ++n);
}

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopTimeout = std::chrono::seconds(30);

absl::StatusOr<std::unique_ptr<PostgresServer>>* shared_server = nullptr;  // Shared()

std::string FindBindir() {
  const char* env = std::getenv("TANDEM_POSTGRES_BINDIR");
  for (const char* candidate : {env, static_cast<const char*>(TANDEM_POSTGRES_BINDIR),
                                static_cast<const char*>("/usr/lib/postgresql/15/bin")}) {
    if (candidate == nullptr || *candidate == '\0') continue;
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(candidate) / "postgres", ec))
      return candidate;
  }
  return "";
}

std::string TempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

// A loopback port nobody listens on right now (the kernel's choice).
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("cannot bind a loopback port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// In a forked child: becomes the server's user (when asked), sends stdout
// and stderr to `log`, sets the parent-death signal and execs argv.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv, const std::string& log, bool drop,
                            uid_t uid, gid_t gid, pid_t parent) {
  if (drop && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) _exit(126);
  // After the credential change (which clears it).
  if (prctl(PR_SET_PDEATHSIG, SIGINT) != 0 || getppid() != parent) _exit(125);
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(124);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->bindir_ = FindBindir();
  if (server->bindir_.empty()) {
    return absl::UnavailableError(
        "PostgreSQL server binaries not found (install postgresql-15 or set "
        "TANDEM_POSTGRES_BINDIR)");
  }
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      return absl::UnavailableError(
          "running as root and there is no `postgres` user to run the server as");
    }
    server->drop_privileges_ = true;
    server->run_uid_ = pw->pw_uid;
    server->run_gid_ = pw->pw_gid;
  }
  std::string templ = absl::StrCat(TempRoot(), "/tandem_pg.XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  server->dir_ = templ;
  if (server->drop_privileges_) {
    if (chown(server->dir_.c_str(), server->run_uid_, server->run_gid_) != 0) {
      return absl::InternalError(absl::StrCat("cannot chown ", server->dir_, " to postgres"));
    }
  }
  TANDEM_RETURN_IF_ERROR(server->InitDb());
  // The port may be taken between the probe and the bind: try a few.
  absl::Status launched;
  for (int attempt = 0; attempt < 5; ++attempt) {
    TANDEM_ASSIGN_OR_RETURN(server->port_, FreeLoopbackPort());
    launched = server->Launch();
    if (launched.ok()) break;
  }
  TANDEM_RETURN_IF_ERROR(launched);
  TANDEM_RETURN_IF_ERROR(server->Query("CREATE DATABASE tandem_test", "postgres").status());
  return server;
}

absl::StatusOr<PostgresServer*> PostgresServer::Shared() {
  if (shared_server == nullptr) {
    shared_server = new absl::StatusOr<std::unique_ptr<PostgresServer>>(Start());
    // Stopped (and its directory removed) at exit; the postmaster's
    // parent-death signal covers a crash.
    std::atexit([] {
      if (shared_server->ok()) shared_server->value().reset();
    });
  }
  if (!shared_server->ok()) return shared_server->status();
  return shared_server->value().get();
}

PostgresServer::~PostgresServer() {
  if (pid_ > 0) {
    // Immediate shutdown: the data is thrown away, skip the checkpoint.
    kill(pid_, SIGQUIT);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string PostgresServer::ConninfoFor(absl::string_view database) const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " user=tandem dbname='", database, "'",
                      " connect_timeout=10");
}

absl::Status PostgresServer::RunTool(const std::vector<std::string>& argv,
                                     const std::string& log) const {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) ExecChild(argv, log, drop_privileges_, run_uid_, run_gid_, parent);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " failed (status ", status, "); see ", log));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::InitDb() {
  // --no-sync only skips initdb's own fsyncs; the server keeps fsync on.
  const std::vector<std::string> flags = {
      "-A", "trust", "-U", "tandem", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"};
  // initdb is most of a start's cost: its result is kept once per user,
  // binary and flags in a template directory, and copied for each server.
  struct stat binary {};
  if (stat((bindir_ + "/postgres").c_str(), &binary) != 0) {
    return absl::UnavailableError("cannot stat the postgres binary");
  }
  std::string key = absl::StrCat(bindir_, "|", binary.st_mtime, "|", binary.st_size);
  for (const std::string& f : flags) absl::StrAppend(&key, "|", f);
  const uid_t owner = drop_privileges_ ? run_uid_ : geteuid();
  const std::string templ = absl::StrCat(TempRoot(), "/tandem_pg_template_", owner, "_",
                                         absl::Hex(std::hash<std::string>()(key)));
  struct stat st {};
  const bool usable = stat(templ.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == owner &&
                      (st.st_mode & 077) == 0 &&
                      stat((templ + "/global/pg_control").c_str(), &st) == 0;
  if (usable) {
    return RunTool({"/bin/cp", "-a", templ, dir_ + "/data"}, dir_ + "/copy.log");
  }
  const std::string log = dir_ + "/initdb.log";
  std::vector<std::string> argv = {bindir_ + "/initdb", "-D", dir_ + "/template"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (absl::Status s = RunTool(argv, log); !s.ok()) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return absl::UnavailableError(absl::StrCat("initdb failed: ", s.message(), "\n", text.str()));
  }
  // Publish it (atomic; another process may have won the race), then copy.
  if (rename((dir_ + "/template").c_str(), templ.c_str()) == 0) {
    return RunTool({"/bin/cp", "-a", templ, dir_ + "/data"}, dir_ + "/copy.log");
  }
  if (rename((dir_ + "/template").c_str(), (dir_ + "/data").c_str()) != 0) {
    return absl::InternalError("cannot move the new data directory into place");
  }
  return absl::OkStatus();
}

std::string PostgresServer::LogTail() const {
  std::ifstream in(dir_ + "/postgres.log");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.size() > 2000) s = s.substr(s.size() - 2000);
  return s;
}

absl::Status PostgresServer::Launch() {
  const std::vector<std::string> argv = {bindir_ + "/postgres",
                                         "-D",
                                         dir_ + "/data",
                                         "-p",
                                         absl::StrCat(port_),
                                         "-c",
                                         "listen_addresses=127.0.0.1",
                                         "-c",
                                         absl::StrCat("unix_socket_directories=", dir_)};
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    ExecChild(argv, dir_ + "/postgres.log", drop_privileges_, run_uid_, run_gid_, parent);
  }
  pid_ = pid;
  const std::string ping = ConninfoFor("postgres");
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("postgres exited during startup (status ", status, "):\n", LogTail()));
    }
    if (PQping(ping.c_str()) == PQPING_OK) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (void)Stop();
  return absl::UnavailableError(absl::StrCat("postgres did not start in time:\n", LogTail()));
}

absl::Status PostgresServer::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  kill(pid_, SIGINT);  // fast shutdown
  const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGQUIT);  // immediate shutdown
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status PostgresServer::Crash() {
  if (pid_ <= 0) return absl::FailedPreconditionError("the server is not running");
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status PostgresServer::Restart() {
  if (pid_ > 0) return absl::FailedPreconditionError("the server is running");
  // The port was ours a moment ago; retry briefly if someone else holds it.
  absl::Status s;
  // After a Crash the old backends may hold the shared memory a moment.
  for (int attempt = 0; attempt < 50; ++attempt) {
    s = Launch();
    if (s.ok()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return s;
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(absl::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return absl::InvalidArgumentError("database names: letters, digits and '_' only");
    }
  }
  TANDEM_RETURN_IF_ERROR(
      Query(absl::StrCat("CREATE DATABASE \"", name, "\""), "postgres").status());
  return ConninfoFor(name);
}

absl::StatusOr<std::string> PostgresServer::Query(absl::string_view sql,
                                                  absl::string_view database) const {
  const std::string conninfo = ConninfoFor(database);
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("cannot connect to the test server: ", msg));
  }
  PGresult* res = PQexec(conn, std::string(sql).c_str());
  const ExecStatusType st = PQresultStatus(res);
  absl::StatusOr<std::string> out;
  if (st == PGRES_TUPLES_OK) {
    out = PQntuples(res) > 0 && PQnfields(res) > 0 ? std::string(PQgetvalue(res, 0, 0)) : "";
  } else if (st == PGRES_COMMAND_OK) {
    out = "";
  } else {
    out = absl::InternalError(absl::StrCat("test query failed: ", PQerrorMessage(conn)));
  }
  PQclear(res);
  PQfinish(conn);
  return out;
}

}  // namespace tandem::aggregator::testing
