#include "tests/testing/daemon_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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
  while (port == 0) {
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
  return std::unique_ptr<DaemonProcess>(new DaemonProcess(pid, port));
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

absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir,
                                                   const std::string& tls_config) {
  AggregatorPair pair;
  const std::string security =
      tls_config.empty() ? "--insecure_plaintext" : "--config=" + tls_config;
  auto helper = DaemonProcess::Start(
      binary,
      {"--role=helper", "--listen=127.0.0.1:0", security, "--state_dir=" + state_dir + "/helper"},
      state_dir + "/helper.log");
  if (!helper.ok()) return helper.status();
  pair.helper = *std::move(helper);
  auto leader = DaemonProcess::Start(
      binary,
      {"--role=leader", "--listen=127.0.0.1:0", security, "--state_dir=" + state_dir + "/leader",
       "--peer=" + pair.helper_address()},
      state_dir + "/leader.log");
  if (!leader.ok()) return leader.status();
  pair.leader = *std::move(leader);
  return pair;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

}  // namespace tandem::testing
