// Runs a tandem daemon binary as a child process for integration tests: real
// process, real sockets on loopback. The child must print "listening on PORT"
// on stdout once it serves. Test-only; not thread-safe.
#ifndef TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_
#define TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
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
  // The port of a "NAME on PORT" line printed before "listening on" (e.g.
  // the aggregator's "collector" and "peer"); 0 when none was printed.
  int named_port(const std::string& name) const;
  pid_t pid() const { return pid_; }
  // Sends SIGKILL and reaps the child (a crash, as far as the daemon knows).
  void Kill();
  // Sends SIGTERM and waits for a clean exit; returns the exit code.
  absl::StatusOr<int> Terminate(absl::Duration timeout = absl::Seconds(20));

 private:
  DaemonProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  int port_;
  std::map<std::string, int> named_ports_;
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

// The policy of aggregators in tests of the bare aggregation arithmetic: no
// noise floor, batches of one, no proofs required, no budget. Never a
// default of the daemon; tests of the privacy policy pass their own.
inline constexpr char kPermissiveTestPolicy[] =
    "min_noise_multiplier: 0 min_batch_size: 1 require_norm_proofs: false epsilon_budget: inf";

struct AggregatorPairOptions {
  // Empty: plaintext on loopback (every API on the upload port, no identity
  // checks). Else a directory from MakeRoleCertificates or
  // deploy/make-certs.sh (<role>-roots.pem used when present): TLS, the collector
  // on its own mutual-TLS port (coordinator.tandem only), the helper's peer
  // API on its own (leader.tandem only).
  std::string certs_dir;
  // PEM Ed25519 public key of the coordinator; empty: --allow_unticketed_uploads.
  std::string ticket_public_key;
  // PrivacyPolicy textproto passed as --policy; empty: no --policy, the
  // daemons' private defaults.
  std::string policy = kPermissiveTestPolicy;
  // The tasks the operator provisioned on both (--task, "ID" or
  // "ID@POPULATION"). Empty: --allow_unprovisioned_tasks, for tests of the
  // bare protocol and the simulator (one operator, a population per run).
  std::vector<std::string> tasks;
  // With certs_dir: each aggregator serves its operator API (--admin_listen,
  // "admin" port) to its own operator, <role>-operator.pem of
  // MakeRoleCertificates (DNS:operator.<role>.tandem).
  bool operator_api = false;
  // Environment entries ("NAME=value") added for one daemon (e.g.
  // SkewedClockEnv): it runs through /usr/bin/env, which execs it (the pid
  // is the daemon's).
  std::vector<std::string> leader_env;
  std::vector<std::string> helper_env;
  // Flags added to both daemons' command lines, last.
  std::vector<std::string> extra_args;
  // Where the leader dials the helper's peer listener, given its address
  // once the helper listens (e.g. a FaultProxy in front of it); unset: there.
  std::function<std::string(const std::string& helper_peer_address)> leader_peer;
};

// A helper and a leader tandem-aggregator on loopback (port 0), state and
// logs under `state_dir`/{helper,leader}[.log].
struct AggregatorPair {
  std::unique_ptr<DaemonProcess> leader;
  std::unique_ptr<DaemonProcess> helper;
  std::string leader_address() const { return Loopback(leader->port()); }  // uploads
  std::string helper_address() const { return Loopback(helper->port()); }
  std::string leader_collector_address() const {
    return Loopback(leader->named_port("collector"));
  }
  std::string helper_collector_address() const {
    return Loopback(helper->named_port("collector"));
  }
  std::string helper_peer_address() const { return Loopback(helper->named_port("peer")); }
  std::string leader_admin_address() const { return Loopback(leader->named_port("admin")); }
  std::string helper_admin_address() const { return Loopback(helper->named_port("admin")); }
};
absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir,
                                                   const AggregatorPairOptions& options);
// Plaintext, unticketed, kPermissiveTestPolicy.
absl::StatusOr<AggregatorPair> StartAggregatorPair(const std::string& binary,
                                                   const std::string& state_dir);

// `binary` with `args`, run through /usr/bin/env with `env` ("NAME=value")
// added when not empty: the binary and arguments to pass to
// DaemonProcess::Start or ChildProcess::Spawn.
struct Command {
  std::string binary;
  std::vector<std::string> args;
};
Command WithEnv(const std::vector<std::string>& env, const std::string& binary,
                std::vector<std::string> args);

// The environment that runs a process with its wall clock (time,
// gettimeofday, CLOCK_REALTIME) `offset` from ours, through Debian's
// libfaketime (CLOCK_MONOTONIC untouched, so timers and gRPC deadlines are
// unaffected). Empty when libfaketime is not installed.
std::vector<std::string> SkewedClockEnv(absl::Duration offset);

// A fresh directory under /tmp, removed by the caller.
std::string MakeTempDir(const std::string& prefix);

// A loopback port for a daemon that must keep one port across restarts,
// reserved for this process until it exits: no other test process calling
// FreePort gets it, even before the daemon binds it. Drawn at random below
// the kernel's ephemeral range (32768-60999 by default), so that no socket
// bound to port 0 or connection made meanwhile takes it either. 0 if none
// was found. Thread-safe.
//
// The reservation is an flock on /tmp/tandem-test-ports/PORT, held on a
// descriptor this process never closes; the kernel releases it when the
// process exits, so a killed test leaves nothing reserved. (A draw seeded
// from the pid alone let tests with nearby pids draw the same sequence
// shifted by the pid difference: two federations then raced for one port
// and a client reached the other test's coordinator.)
int FreePort();

// The arguments of one tandem-aggregator speaking the bare aggregation
// protocol on plaintext loopback (no TLS, tickets or provisioning;
// kPermissiveTestPolicy), its state in `state_dir`/`role`: for tests of the
// protocol itself (the leader still needs --peer).
std::vector<std::string> BareAggregatorArgs(const std::string& role, const std::string& state_dir);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_DAEMON_PROCESS_H_
