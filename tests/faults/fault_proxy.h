// A fault-injecting TCP proxy for the fault harness (tests/faults): one link
// between two real daemons goes through it, and a test degrades or breaks
// that link on command while the daemons run. The kernel of these machines
// has no sch_netem, so delay, loss, stalls and partitions are made here, at
// the TCP level, on loopback only (it listens on 127.0.0.1 and forwards to a
// loopback target; TLS passes through untouched).
//
// Faults, per proxy (both directions):
//  - delay + jitter: every chunk is forwarded `delay` + U[0, jitter) after it
//    arrived, order kept (a queue per direction, so throughput is not cut);
//  - loss: TCP hides a lost segment behind a retransmission, so a chunk is
//    held back by `penalty` (an RTO) with probability p, the rest of the
//    stream behind it;
//  - stall: bytes are read but not forwarded until Resume() (a peer that
//    hangs, as SIGSTOP leaves its sockets open);
//  - cut: every connection is reset and new ones are closed on accept until
//    Heal() (a partition; the daemons must reconnect).
// Randomness is a fixed-seed std::mt19937_64, so a scenario replays.
//
// Thread-safe: the controls may be called from any thread while traffic
// flows. The destructor stops accepting, closes every connection and joins
// every thread; errors of the sockets end the affected connection only.
#ifndef TANDEM_TESTS_FAULTS_FAULT_PROXY_H_
#define TANDEM_TESTS_FAULTS_FAULT_PROXY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::testing {

class FaultProxy {
 public:
  // Listens on 127.0.0.1 (ephemeral port) and forwards to `target`
  // ("127.0.0.1:PORT" or "localhost:PORT"). INVALID_ARGUMENT for any other
  // target (the harness never sends traffic off loopback); INTERNAL when
  // the socket calls fail.
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(const std::string& target,
                                                           uint64_t seed = 1);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string address() const;  // "127.0.0.1:PORT", what the dialing daemon gets
  int port() const { return port_; }

  void SetDelay(absl::Duration delay, absl::Duration jitter);
  void SetLoss(double probability, absl::Duration penalty);
  void Stall();
  void Resume();
  void Cut();
  void Heal();
  // Plaintext HTTP/2 (gRPC without TLS) from the target only: cuts the link
  // (as Cut()) at the `n`th call response the target sends from now on (a
  // HEADERS frame with END_STREAM: the call's trailers), right after it
  // (the caller has the reply; its next call meets the cut) or, with
  // `before`, just before it (the target handled the call; its reply is
  // lost). Deterministic where Cut() at a time is not: e.g. between the
  // leader's Verify and CommitAcceptedSet.
  void CutAtResponse(int n, bool before);

  bool is_cut() const { return cut_.load(); }
  uint64_t connections_accepted() const { return accepted_.load(); }
  uint64_t connections_refused() const { return refused_.load(); }
  // Bytes handed on to the other end (both directions, all connections).
  uint64_t bytes_forwarded() const { return forwarded_.load(); }

 private:
  struct Link;
  FaultProxy(int listen_fd, int port, int target_port, uint64_t seed);
  void AcceptLoop();
  // Reads `from` into the link's queue for one direction / writes the queue
  // to `to` when each chunk is due.
  void Reader(Link* link, int direction);
  void Writer(Link* link, int direction);
  absl::Time DueTime(absl::Time arrived);
  void CloseLink(Link* link);
  // Follows the HTTP/2 frames of `bytes` (the target's next bytes on
  // `link`); true when an armed CutAtResponse falls in them, with the bytes
  // to forward before cutting in *keep. While armed, a frame header cut
  // short by the end of `bytes` is not forwarded yet: *hold is where it
  // starts (the writer sends it with the next bytes).
  bool FindCutPoint(Link* link, const std::string& bytes, size_t* keep, size_t* hold);

  const int listen_fd_;
  const int port_;
  const int target_port_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> cut_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<int> cut_at_response_{0};  // 0: not armed
  std::atomic<bool> cut_before_{false};
  std::atomic<int> responses_seen_{0};
  std::atomic<uint64_t> accepted_{0}, refused_{0}, forwarded_{0};
  absl::Mutex mu_;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Duration jitter_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  double loss_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration penalty_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FAULTS_FAULT_PROXY_H_
