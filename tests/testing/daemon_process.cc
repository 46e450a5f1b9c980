#include "tests/testing/daemon_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/testing/certificates.h"

namespace tandem::testing {
namespace {

// In the forked child: replaces the process image, or exits 127.
[[noreturn]] void ExecOrDie(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(binary.c_str(), argv.data());
  _exit(127);
}

// Reaps `pid` when it has exited: its exit code (128 + signal when killed).
std::optional<int> Reaped(pid_t pid) {
  int status;
  if (waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
    absl::Duration timeout) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    if (!log_path.empty()) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, STDERR_FILENO);
    }
    ExecOrDie(binary, args);
  }
  close(out[1]);
  std::string seen;
  const absl::Time deadline = absl::Now() + timeout;
  int port = 0;
  while (port == 0) {  // the "listening on" line comes last
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left))) <= 0) break;
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
    const size_t at = seen.find("listening on ");
    const size_t eol = at == std::string::npos ? at : seen.find('\n', at);
    if (eol != std::string::npos) {
      if (!absl::SimpleAtoi(seen.substr(at + 13, eol - at - 13), &port)) port = -1;
    }
  }
  close(out[0]);
  if (port <= 0) {
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    return absl::UnavailableError(absl::StrCat(binary, " did not report a port; stdout: '", seen,
                                               "'"));
  }
  auto daemon = std::unique_ptr<DaemonProcess>(new DaemonProcess(pid, port));
  // Lines "NAME on PORT" printed before the "listening on" line.
  for (absl::string_view line : absl::StrSplit(seen, '\n')) {
    const size_t on = line.find(" on ");
    int named = 0;
    if (on != absl::string_view::npos && !absl::StartsWith(line, "listening") &&
        absl::SimpleAtoi(line.substr(on + 4), &named)) {
      daemon->named_ports_[std::string(line.substr(0, on))] = named;
    }
  }
  return daemon;
}

DaemonProcess::~DaemonProcess() { Kill(); }

void DaemonProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::StatusOr<int> DaemonProcess::Terminate(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (std::optional<int> rc = Reaped(pid_)) {
      pid_ = -1;
      return *rc;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  Kill();
  return absl::DeadlineExceededError("daemon did not stop on SIGTERM");
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::string& binary, const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (!log_path.empty()) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
    }
    ExecOrDie(binary, args);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() { Kill(); }

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (std::optional<int> rc = Reaped(pid_)) {
      pid_ = -1;
      return *rc;
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("child still running");
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

int DaemonProcess::named_port(const std::string& name) const {
  auto it = named_ports_.find(name);
  return it == named_ports_.end() ? 0 : it->second;
}

absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir,
                                                   const AggregatorPairOptions& options) {
  AggregatorPair pair;
  // The logs' folder first: the helper's log would be lost otherwise (its
  // own state folder under it is made by the daemon).
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  std::vector<std::string> common;
  if (options.certs_dir.empty()) {
    common.push_back("--insecure_plaintext");
  } else {
    common.push_back("--coordinator_identity=coordinator.tandem");
    common.push_back("--collector_listen=127.0.0.1:0");
  }
  if (options.ticket_public_key.empty()) {
    common.push_back("--allow_unticketed_uploads");
  } else {
    common.push_back("--coordinator_key=" + options.ticket_public_key);
  }
  if (!options.policy.empty()) common.push_back("--policy=" + options.policy);
  if (options.tasks.empty()) {
    common.push_back("--allow_unprovisioned_tasks");
  } else {
    common.push_back("--task=" + absl::StrJoin(options.tasks, ","));
  }
  auto role_args = [&](const std::string& role) {
    std::vector<std::string> a = common;
    a.push_back("--role=" + role);
    a.push_back("--listen=127.0.0.1:0");
    a.push_back("--state_dir=" + state_dir + "/" + role);
    a.insert(a.end(), options.extra_args.begin(), options.extra_args.end());
    if (!options.certs_dir.empty()) {
      a.push_back("--tls_ca=" + RootsFile(options.certs_dir, role));
      a.push_back("--tls_cert=" + options.certs_dir + "/" + role + ".pem");
      a.push_back("--tls_key=" + options.certs_dir + "/" + role + ".key");
      if (options.operator_api) {
        a.push_back("--admin_listen=127.0.0.1:0");
        a.push_back("--operator_identity=operator." + role + ".tandem");
      }
    }
    return a;
  };
  std::vector<std::string> helper_args = role_args("helper");
  if (!options.certs_dir.empty()) {
    helper_args.push_back("--peer_listen=127.0.0.1:0");
    helper_args.push_back("--leader_identity=leader.tandem");
  }
  Command h = WithEnv(options.helper_env, binary, std::move(helper_args));
  auto helper = DaemonProcess::Start(h.binary, h.args, state_dir + "/helper.log");
  if (!helper.ok()) return helper.status();
  pair.helper = *std::move(helper);
  std::vector<std::string> leader_args = role_args("leader");
  const std::string peer = Loopback(pair.helper->named_port("peer"));
  leader_args.push_back("--peer=" + (options.leader_peer ? options.leader_peer(peer) : peer));
  if (!options.certs_dir.empty()) leader_args.push_back("--peer_name=helper.tandem");
  Command l = WithEnv(options.leader_env, binary, std::move(leader_args));
  auto leader = DaemonProcess::Start(l.binary, l.args, state_dir + "/leader.log");
  if (!leader.ok()) return leader.status();
  pair.leader = *std::move(leader);
  return pair;
}

absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir) {
  return StartAggregatorPair(binary, state_dir, AggregatorPairOptions{});
}

std::vector<std::string> BareAggregatorArgs(const std::string& role, const std::string& state_dir) {
  return {"--role=" + role,
          "--listen=127.0.0.1:0",
          "--state_dir=" + state_dir + "/" + role,
          "--insecure_plaintext",
          "--allow_unticketed_uploads",
          "--allow_unprovisioned_tasks",
          std::string("--policy=") + kPermissiveTestPolicy};
}

Command WithEnv(const std::vector<std::string>& env, const std::string& binary,
                std::vector<std::string> args) {
  if (env.empty()) return Command{binary, std::move(args)};
  std::vector<std::string> a = env;
  a.push_back(binary);
  a.insert(a.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  return Command{"/usr/bin/env", std::move(a)};
}

std::vector<std::string> SkewedClockEnv(absl::Duration offset) {
  // The thread-safe variant: the daemons are multithreaded.
  constexpr char kLibrary[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  if (!std::filesystem::exists(kLibrary)) return {};
  const int64_t s = absl::ToInt64Seconds(offset);
  return {absl::StrCat("LD_PRELOAD=", kLibrary), absl::StrCat("FAKETIME=", s >= 0 ? "+" : "", s),
          "FAKETIME_DONT_FAKE_MONOTONIC=1"};
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

int FreePort() {
  constexpr char kDir[] = "/tmp/tandem-test-ports";
  mkdir(kDir, 01777);  // EEXIST is fine; another test made it
  for (int attempt = 0; attempt < 1000; ++attempt) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r)) return 0;
    const int port = 20000 + static_cast<int>(r % 12000u);
    const std::string lock_path = absl::StrCat(kDir, "/", port);
    const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock < 0) continue;
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) {  // another test process holds it
      close(lock);
      continue;
    }
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    if (free) return port;  // `lock` stays open: the reservation lasts until exit
    close(lock);
  }
  return 0;
}

}  // namespace tandem::testing
