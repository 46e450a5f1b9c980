// Per-task state of an Aggregator (private to aggregator/core).
#ifndef TANDEM_AGGREGATOR_CORE_TASK_H_
#define TANDEM_AGGREGATOR_CORE_TASK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/combining_queue.h"
#include "aggregator/core/policy.h"
#include "aggregator/core/prepared_noise.h"
#include "aggregator/core/round_codec.h"
#include "aggregator/core/share_cache.h"
#include "aggregator/store/report_store.h"
#include "crypto/dp/accountant.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/norm_proof.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {

// Seconds since `start` on the steady clock (Task::expansion_seconds).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Lock order: process_mu before state_mu. state_mu is held only briefly
// (uploads read the round under it); process_mu serialises verification,
// commits and finalize, and guards the accumulator.
struct Aggregator::Task {
  std::string id;
  std::unique_ptr<ReportStore> store;
  Policy policy;  // this server's policy for the task (immutable)
  // Pending reports' parsed shares from upload to verification (set when
  // the task is created; thread-safe on its own).
  std::unique_ptr<PendingShareCache> share_cache;

  absl::Mutex process_mu;
  absl::Mutex state_mu ABSL_ACQUIRED_AFTER(process_mu);

  // The task's latest round (0 = none yet).
  int64_t round_id ABSL_GUARDED_BY(state_mu) = 0;
  bool closed ABSL_GUARDED_BY(state_mu) = false;
  bool released ABSL_GUARDED_BY(state_mu) = false;  // closed by its release
  proto::RoundParameters parameters ABSL_GUARDED_BY(state_mu);
  int64_t received ABSL_GUARDED_BY(state_mu) = 0;  // reports stored this round
  // The round's encoding: PREAMBLE keys or dense shares, and its proof
  // system in rounds with a norm bound (immutable, shared with concurrent
  // uploads and the verification pass); null before the first round.
  std::shared_ptr<const RoundCodec> codec ABSL_GUARDED_BY(state_mu);

  // Group commit of uploads: concurrent uploads are stored in one
  // transaction (one fsync). Leader-follower (combining_queue.h): whichever
  // waiting upload finds no flush in progress stores everything queued for
  // the round at the head of the queue.
  struct QueuedUpload {
    int64_t round_id = 0;
    PendingReport report;
    std::shared_ptr<const ParsedShare> parsed;  // cached once stored
    absl::Status status;
    bool done = false;
  };
  CombiningQueue<QueuedUpload> uploads;

  // Uploads' duplicate pre-checks, coalesced the same way: whichever
  // waiting upload finds no read in progress looks up every queued id in
  // one GetReportStates call (one store snapshot) instead of one each.
  struct QueuedCheck {
    std::string report_id;
    absl::StatusOr<std::optional<ReportRecord>> state;  // nullopt: unknown id
    bool done = false;
  };
  CombiningQueue<QueuedCheck> checks;

  std::vector<uint64_t> accumulator ABSL_GUARDED_BY(process_mu);
  // Reports in `accumulator` (accepted by both servers this round).
  int64_t counted ABSL_GUARDED_BY(process_mu) = 0;
  // The accepted reports in `accumulator` but not yet in the stored
  // snapshot (decided with CommitDecisions, shares still stored); the next
  // checkpoint counts them (commit.cc). Always a subset of `counted`.
  std::vector<std::string> uncheckpointed ABSL_GUARDED_BY(process_mu);
  int64_t checkpoints ABSL_GUARDED_BY(process_mu) = 0;  // since the task loaded
  // When the task last committed accepted reports (SaveIdlePartials).
  absl::Time last_commit ABSL_GUARDED_BY(process_mu) = absl::InfinitePast();
  // This server's accounting of the task: every released round (rebuilt
  // from the store's kReleased rounds on load). The accountant's own budget
  // is unbounded; the policy's is compared in OpenRound.
  std::optional<dp::PrivacyAccountant> accountant ABSL_GUARDED_BY(process_mu);
  int64_t released_rounds ABSL_GUARDED_BY(process_mu) = 0;
  bool released_without_noise ABSL_GUARDED_BY(process_mu) = false;  // epsilon = +inf
  // Helper only: outcome of its own digest comparison per report id, from
  // the latest Verify exchange (lost on restart; the leader re-verifies).
  absl::flat_hash_map<std::string, bool> verified ABSL_GUARDED_BY(process_mu);
  // Leader only: pending reports the helper said it does not hold, with the
  // time before which a pass skips them (exponential backoff from 100 ms to
  // 10 s) and the misses so far: an upload to the leader alone is expanded
  // a few times, not on every 100 ms pass (issue 34 item 5). The final pass
  // before a release decides them all regardless. Reset when a round opens.
  struct PeerMissing {
    absl::Time retry_after;
    int misses = 0;
  };
  absl::flat_hash_map<std::string, PeerMissing> peer_missing ABSL_GUARDED_BY(process_mu);
  // AggregatorStatusResponse's expansion counters, since the task loaded.
  int64_t share_expansions ABSL_GUARDED_BY(process_mu) = 0;
  int64_t undo_expansions ABSL_GUARDED_BY(process_mu) = 0;
  int64_t check_evaluations ABSL_GUARDED_BY(process_mu) = 0;
  double expansion_seconds ABSL_GUARDED_BY(process_mu) = 0;
  // Shares verification and commits read back from the store (cache misses).
  int64_t stored_share_reads ABSL_GUARDED_BY(process_mu) = 0;
  // The process_mu part of the last Status answer. A verification pass
  // holds process_mu across its peer calls (up to their deadline when the
  // peer hangs), so Status answers from this copy when process_mu is busy
  // rather than wait (fault harness: a stalled helper blocked it ~60 s).
  absl::Mutex status_mu ABSL_ACQUIRED_AFTER(process_mu);
  proto::AggregatorStatusResponse process_status ABSL_GUARDED_BY(status_mu);
  // Helper only: the tentative aggregate, i.e. the sum of the expansions of
  // exactly `tentative_ids`, reports verified (and expanded, once, in the
  // same pass as their digests) but not yet committed (expansion.h). A
  // commit counts its accepted reports out of it and takes every other one
  // back out; a report not in it is expanded at commit, so any failure may
  // simply reset both (ResetTentative). Empty until the first Verify.
  std::vector<uint64_t> tentative ABSL_GUARDED_BY(process_mu);
  absl::flat_hash_set<std::string> tentative_ids ABSL_GUARDED_BY(process_mu);
  void ResetTentative() ABSL_EXCLUSIVE_LOCKS_REQUIRED(process_mu) {
    tentative.clear();
    tentative_ids.clear();
  }
  // Rounds with a norm bound: the 32-byte secret from which both servers
  // derive the FLP query points. The leader draws it (SecureRandom) on the
  // round's first exchange; the helper keeps the first one it is sent and
  // answers every later request of the round at that seed only, so a
  // leader cannot collect more than the Q points per report that the proof
  // hides (crypto/proof/flp.h). The helper's is durable
  // (ReportStore::BindRoundSecret), so a restart does not forget it.
  std::string query_seed ABSL_GUARDED_BY(process_mu);
  // The open round's release noise, drawn since OpenRound on a thread of
  // its own (prepared_noise.h); taken by its release, dropped (joined and
  // wiped) when another round opens. Null after a restart, for a round
  // without noise, or once taken: the release then draws its own.
  std::unique_ptr<PreparedNoise> prepared_noise ABSL_GUARDED_BY(process_mu);
};

// Accumulator <-> store bytes (little-endian uint64 array).
std::string EncodeAccumulator(const std::vector<uint64_t>& values);
absl::StatusOr<std::vector<uint64_t>> DecodeAccumulator(absl::string_view bytes,
                                                        uint64_t dimension);

// The hash both servers compare for a report in Verify: SHA-256 over a
// domain tag, the report id, the ticket digest (may be empty) and the
// server's VDPF digest.
std::string BoundCheckHash(absl::string_view report_id, absl::string_view ticket_digest,
                           const crypto::ProofDigest& digest);

// A task's accountant at the policy's delta. Its own budget is unbounded:
// the policy's is compared in OpenRound (so a budget lowered in the config
// still lets the released history load).
absl::StatusOr<dp::PrivacyAccountant> MakeAccountant(const Policy& policy);

// Checks RoundParameters and builds the round's codec (DPF or dense
// sharing, and proof system). INVALID_ARGUMENT.
absl::StatusOr<std::shared_ptr<const RoundCodec>> CodecForRound(const proto::RoundParameters& p,
                                                                const AggregatorOptions& options);

// Checks PREAMBLE RoundParameters and builds the round's DPF. INVALID_ARGUMENT.
absl::StatusOr<crypto::SparseDpf> DpfForRound(const proto::RoundParameters& p,
                                              const AggregatorOptions& options);

// The round's norm-proof system when it has a norm_bound, else null.
// INVALID_ARGUMENT for bounds crypto/proof rejects.
absl::StatusOr<std::shared_ptr<const crypto::proof::NormProofSystem>> ProofForRound(
    const proto::RoundParameters& p);

inline constexpr size_t kReportIdBytes = 16;

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_TASK_H_
