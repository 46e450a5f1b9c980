// Runs a tandem daemon binary as a child process for integration tests: real
// process, real sockets on loopback. The child must print "listening on PORT"
// on stdout once it serves. Test-only; not thread-safe.
#ifndef TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_
#define TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::testing {

class DaemonProcess {
 public:
  // Starts `binary` with `args` and waits up to `timeout` for its port line.
  // Its stderr goes to `log_path` (appended) when set, else to ours.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args,
      const std::string& log_path = "", absl::Duration timeout = absl::Seconds(30));
  ~DaemonProcess();  // SIGKILL if still running.

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends SIGKILL and reaps the child (a crash, as far as the daemon knows).
  void Kill();
  // Sends SIGTERM and waits for a clean exit; returns the exit code.
  absl::StatusOr<int> Terminate(absl::Duration timeout = absl::Seconds(20));

 private:
  DaemonProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  int port_;
};

// A short-lived child (e.g. tandem-client) with stdout and stderr appended
// to `log_path` (or ours when empty). Test-only; not thread-safe.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::string& binary,
                                                             const std::vector<std::string>& args,
                                                             const std::string& log_path = "");
  ~ChildProcess();  // SIGKILL if still running.
  pid_t pid() const { return pid_; }
  // Exit code (128 + signal when killed); DEADLINE_EXCEEDED if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  void Kill();

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// "127.0.0.1:PORT".
std::string Loopback(int port);

// A helper and a leader tandem-aggregator on loopback (port 0), state and
// logs under `state_dir`/{helper,leader}[.log]. Plaintext, or TLS from the
// AggregatorConfig textproto `tls_config` (its tls block) when set.
struct AggregatorPair {
  std::unique_ptr<DaemonProcess> leader;
  std::unique_ptr<DaemonProcess> helper;
  std::string leader_address() const { return Loopback(leader->port()); }
  std::string helper_address() const { return Loopback(helper->port()); }
};
absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir,
                                                   const std::string& tls_config = "");

// A fresh directory under /tmp, removed by the caller.
std::string MakeTempDir(const std::string& prefix);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_
