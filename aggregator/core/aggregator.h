// One tandem aggregation server (PREAMBLE, Asi et al., NeurIPS 2025, in
// Prio's two-server trust model: the leader and the helper do not collude).
//
// Life of a report, on each server:
//   Upload: the coordinator-signed upload ticket is checked first
//     (crypto/sign/upload_ticket.h: this task, round and report id, not
//     expired; UNAUTHENTICATED otherwise), then the share against the
//     round's DPF shape (crypto/dpf/key_validator.h); it is stored durably
//     as pending (report id = ticket id = idempotency key, so one report per
//     ticket; replays refused by the store).
//   Verification (driven by the leader, ProcessPending): both servers compute
//     the VDPF proof digest of their share; the leader sends its digests,
//     the helper compares with its own and answers with them. What is
//     compared is SHA-256 over the report id, the ticket's digest and the
//     VDPF digest, so both servers also confirm they hold the same ticket.
//     Equal digests
//     = accepted, different = rejected; a report the helper lacks stays
//     pending. Each server decides independently; the leader's commit names
//     the decided sets and the helper refuses a commit that disagrees with
//     its own comparison.
//   Norm proofs (rounds with RoundParameters.norm_bound; crypto/proof/
//     norm_proof.h): uploads carry a proof share; in the same exchange each
//     server expands its share once for the digest and the proof's derived
//     inputs, and sends its verifier share next to its digest. Both decide
//     from the same two verifier shares (plus the digests), so they accept
//     or reject every report together, in one round trip.
//   Commit: each server adds the accepted shares to its accumulator (the
//     expansion of the verification pass; oneTBB across reports and chunks)
//     and stores the report states in one transaction; every
//     checkpoint_reports accepted reports (and before a release) the
//     accumulator is saved with them in that transaction. Accepted reports
//     keep their shares until then, so a SIGKILL at any point loses no
//     accepted report and counts none twice (a restart re-expands them).
//   Finalize: remaining pending reports are verified or rejected, the batch
//     size is checked against the minimum (the larger of the round's and
//     this server's policy), the share gets this server's own discrete
//     Gaussian noise (crypto/dp; drawn on a thread of its own since the
//     round opened, prepared_noise.h), and the noised share is saved and the
//     round released in one store transaction; the same noised share is
//     returned on every retry (never a second draw), and the release is
//     charged to this server's own accountant (aggregator/core/policy.h).
//   Policy: OpenRound is checked against this server's policy for the task
//     (noise floor, min batch, sizes, norm proofs required) and refused with
//     FAILED_PRECONDITION when the release would exceed its epsilon budget.
//   Replicas (issue 24; a store with ReplicatedWork, report_store.h): several
//     processes serve one operator over one PostgreSQL database. Any of
//     them takes uploads; the leader's replicas verify pending reports in
//     batches each leases for itself (ProcessLeasedLocked: a batch whose
//     replica dies is taken by another once its lease expires); each
//     replica's accepted reports go into its own partial accumulator; the
//     replica asked to Finalize adopts the reports others accepted but have
//     not counted, sums every partial and noises the sum once (release.cc).
//     A replica whose view is stale (a round opened, released or closed by
//     another) reloads it from the store (RefreshIfStale), and OpenRound
//     reloads the released rounds first, so every replica charges the same
//     privacy budget.
//
// Thread safety: all methods are thread-safe. Uploads run concurrently;
// verification, commit and finalize of one task are serialised.
// Ownership: the Aggregator owns its stores (from the factory); the peer
// channel, clock and noise random are not owned and must outlive it.
#ifndef TANDEM_AGGREGATOR_CORE_AGGREGATOR_H_
#define TANDEM_AGGREGATOR_CORE_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/core/peer_channel.h"
#include "aggregator/core/policy.h"
#include "aggregator/store/report_store.h"
#include "base/clock.h"
#include "base/random.h"
#include "crypto/sign/ed25519.h"
#include "google/protobuf/arena.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {

enum class Role { kLeader = 0, kHelper = 1 };

struct ParsedShare;  // norm_verification.h

absl::StatusOr<Role> ParseRole(absl::string_view name);
const char* RoleName(Role role);

// Opens the durable store of one task. With create_if_missing false it
// returns NOT_FOUND for a task that has no store yet.
using StoreFactory = absl::AnyInvocable<absl::StatusOr<std::unique_ptr<ReportStore>>(
    absl::string_view task_id, bool create_if_missing)>;

struct AggregatorOptions {
  Role role = Role::kLeader;
  // Reports verified and committed per exchange with the helper, at most
  // (fewer where the round's verifier shares would exceed
  // RoundCodec::kMaxVerifierBytesPerExchange). Each batch pays fixed
  // costs (a copy of the accumulator, the exchange, two store commits, the
  // tail of its parallel expansions): 256 instead of 64 took the pair's
  // pipelined ingest from 2,335-2,447 to 2,583-2,718 reports/s at D = 2^17
  // and from 758-777 to 779-817 at 2^20 (aggregator_pair_benchmark,
  // bench/README.md, issue 36).
  int verify_batch_size = 256;
  // Accumulator checkpoints: the accumulator (8 bytes per coordinate) is
  // saved once at least this many accepted reports are not in the saved
  // snapshot, and before every release. In between, a batch commits only its
  // decisions and its accepted reports keep their stored shares, so a
  // restart re-expands at most about checkpoint_reports + verify_batch_size
  // reports (commit.cc). 1 = a snapshot with every batch.
  int checkpoint_reports = 512;
  // Replicated stores (SaveIdlePartials): a task that accepted reports and
  // then committed nothing for this long saves its partial accumulator.
  absl::Duration idle_checkpoint = absl::Seconds(1);
  // Per task: bytes of pending reports' parsed shares kept in memory from
  // upload to verification, so that they are neither read back from the
  // store nor parsed again (share_cache.h; ~134 KB per report at D = 2^20,
  // so the default holds ~2,000 of them). 0 = always read the store.
  int64_t pending_share_cache_bytes = int64_t{256} << 20;
  // Upper bound on any round's max_reports (the round may ask for fewer).
  uint32_t max_reports_per_round = 100000;
  // Upper bound on any round's dimension D (memory: 8 bytes per coordinate).
  uint64_t max_dimension = uint64_t{1} << 24;
  // The privacy policy per task (the private defaults unless configured).
  PolicySet policies = PolicySet::Uniform(Policy{});
  // The coordinator's ticket key: when set, every upload needs a ticket it
  // signed. Null only by explicit opt-out (AggregatorConfig
  // allow_unticketed_uploads).
  std::shared_ptr<const crypto::Ed25519VerifyingKey> ticket_key;
  // Further coordinator keys accepted beside ticket_key (rotation with
  // overlap: the coordinator signs with its new key while tickets signed
  // with the old one are still valid; drop it once they have expired).
  std::vector<crypto::Ed25519VerifyingKey> previous_ticket_keys;
  // With a ticket key: every ticket must name the device key the
  // coordinator checked at check-in (UploadTicket.device_public_key), and
  // every upload must carry that device's signature over this server's
  // role, the ticket and the share (crypto/sign/device_auth.h). A ticket
  // that names a device key is always checked so, whatever this says; off
  // only by explicit opt-out (AggregatorConfig allow_unbound_tickets).
  bool require_device_bound_tickets = false;
  // Tolerance for a clock that disagrees with the coordinator's: uploads
  // are accepted up to this long past their ticket's expiry and the round's
  // deadline, both set on the coordinator's clock (the round still ends at
  // the coordinator's Finalize). 5 minutes, MIT Kerberos' default clockskew
  // for the same problem (tickets stamped on one clock, checked on
  // another); in [0, 1 h].
  absl::Duration max_clock_skew = absl::Minutes(5);
};

class Aggregator {
 public:
  // INVALID_ARGUMENT for bad options, a missing leader peer, or null seams.
  // `peer` may be null for the helper only.
  static absl::StatusOr<std::unique_ptr<Aggregator>> Create(AggregatorOptions options,
                                                            StoreFactory store_factory,
                                                            PeerChannel* peer, Clock* clock,
                                                            SecureRandom* noise_random);
  ~Aggregator();

  Role role() const { return options_.role; }
  // This server's clock and the skew it tolerates (options), for the
  // coordinator's measurement of their offset (OpenRoundResponse).
  absl::Time Now() const { return clock_->Now(); }
  absl::Duration max_clock_skew() const { return options_.max_clock_skew; }

  // Whether this server's operator provisioned the task (PolicySet).
  bool Provisioned(absl::string_view task_id) const { return policies()->Provisioned(task_id); }
  // The policies in force: a snapshot, since the operator API replaces the
  // set at run time (SetPolicies). A task keeps the policy it was loaded
  // with; a changed set applies from the next OpenRound.
  std::shared_ptr<const PolicySet> policies() const ABSL_LOCKS_EXCLUDED(policies_mu_);
  // Swaps in `policies` (the operator API, once its change is durable).
  void SetPolicies(PolicySet policies) ABSL_LOCKS_EXCLUDED(policies_mu_);

  // Collector API (from the coordinator).
  // INVALID_ARGUMENT bad parameters or parameters this server's policy
  // refuses; ALREADY_EXISTS the round exists with other parameters;
  // FAILED_PRECONDITION a task this server's operator did not provision
  // (nothing is created for it), a round id not above the last one, or a
  // release that would exceed this server's privacy budget (the task's, or
  // its population's over all its tasks); RESOURCE_EXHAUSTED no room
  // for another task. Idempotent for identical parameters.
  absl::Status OpenRound(const proto::RoundParameters& parameters);
  // See the file comment. FAILED_PRECONDITION when fewer than
  // dp.min_batch_size reports were accepted (nothing is released, the round
  // stays open); NOT_FOUND unknown task or round.
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest& request);
  absl::StatusOr<proto::AggregatorStatusResponse> Status(
      const proto::AggregatorStatusRequest& request);
  // Ends the task's open round without a release (the coordinator deleted
  // the task): nothing more is accepted, its aggregate never leaves, and its
  // advance charge on the population's ledger is dropped (population.cc).
  // OK also when it is already abandoned or a later round is open (a
  // retry); FAILED_PRECONDITION when it was released; NOT_FOUND for an
  // unknown task or a round not yet opened.
  absl::Status AbandonRound(absl::string_view task_id, uint64_t round_id);

  // Client API. UNAUTHENTICATED no valid ticket (checked before anything
  // else); INVALID_ARGUMENT malformed request or key share; NOT_FOUND
  // unknown task/round; FAILED_PRECONDITION round closed or past deadline;
  // ALREADY_EXISTS report id reused with other content; RESOURCE_EXHAUSTED
  // round full. An identical retry succeeds.
  // Copies the share and proof into the pending-share cache.
  absl::StatusOr<proto::UploadResponse> Upload(const proto::UploadRequest& request);
  // The same for a request parsed onto `arena` (REQUIRES: non-null,
  // request->GetArena() == arena.get(); INTERNAL otherwise): the
  // pending-share cache keeps the arena, and with it the parsed share,
  // instead of copying the share out (the gRPC service parses each upload
  // onto its own arena:
  // ~100 heap allocations fewer per 2^17 share, and the share is freed at
  // once, bench/README.md). Afterwards the request is unspecified and
  // may outlive the caller's reference to the arena.
  absl::StatusOr<proto::UploadResponse> Upload(proto::UploadRequest* request,
                                               std::shared_ptr<google::protobuf::Arena> arena);
  // The options of such an arena: a first block of 32 KiB, then blocks
  // that double up to 1 MiB (a request is at most the server's receive
  // limit, checked before it is parsed). The pending-share cache charges an
  // entry its arena's blocks where they exceed its stored size.
  static google::protobuf::ArenaOptions UploadArenaOptions();
  // An empty request on a fresh arena with those options: what the upload
  // service parses each call into before Upload(request, arena).
  struct ArenaUpload {
    std::shared_ptr<google::protobuf::Arena> arena;
    proto::UploadRequest* request;  // lives on *arena
  };
  static ArenaUpload NewArenaUpload();

  // Leader only: verifies and commits pending reports of the task's open
  // round with the helper, batch by batch, until none is left that the
  // helper holds. Returns the number of reports decided. UNAVAILABLE when
  // the helper cannot be reached (nothing is lost; retry later).
  absl::StatusOr<int> ProcessPending(absl::string_view task_id);
  // Leader only: ProcessPending for every task with an open round.
  absl::Status ProcessAllPending();
  // Replicated stores only (a no-op otherwise), either role, called
  // periodically: saves the partial accumulator of every open task that
  // holds accepted reports not yet saved and has committed nothing for
  // AggregatorOptions::idle_checkpoint (Clock time). Returns the first error.
  absl::Status SaveIdlePartials();

  // Peer API (helper side).
  absl::StatusOr<proto::VerifyResponse> HandleVerify(const proto::VerifyRequest& request);
  absl::StatusOr<proto::AcceptedSetAck> HandleCommit(const proto::AcceptedSet& request);

 private:
  struct Task;
  // Upload; `on_arena` is null (the share is copied) or the caller's
  // mutable `request`, which lives on `arena` (kept by the cache).
  absl::StatusOr<proto::UploadResponse> UploadImpl(const proto::UploadRequest& request,
                                                   proto::UploadRequest* on_arena,
                                                   std::shared_ptr<google::protobuf::Arena> arena);
  Aggregator(AggregatorOptions options, StoreFactory store_factory, PeerChannel* peer,
             Clock* clock, SecureRandom* noise_random);

  // Copies the process_mu part of Status into task.process_status, which
  // Status reads when a pass holds process_mu (REQUIRES task.process_mu).
  static void PublishProcessStatusLocked(Task& task);

  // Returns the loaded task (opening its store on first use).
  absl::StatusOr<Task*> GetTask(absl::string_view task_id, bool create)
      ABSL_LOCKS_EXCLUDED(tasks_mu_);
  // Stores one upload durably through the task's group commit; `parsed`
  // (its share as verification reads it) is cached once the store holds it
  // (share_cache.h).
  absl::Status StoreUpload(Task& task, int64_t round_id, PendingReport report,
                           std::shared_ptr<const ParsedShare> parsed);
  // The stored state of `report_id` (nullopt when the store has none),
  // read together with the other uploads' checks queued meanwhile. Errors
  // of ReportStore::GetReportStates.
  static absl::StatusOr<std::optional<ReportRecord>> StoredState(Task& task,
                                                                 const std::string& report_id);
  // The ticket's digest (empty without ticket key), UNAUTHENTICATED when it
  // is missing, forged, for another task/round/report or expired.
  // `ticket` receives the verified ticket (unset without ticket key).
  absl::StatusOr<std::string> CheckTicket(const proto::UploadRequest& request,
                                          proto::UploadTicket* ticket) const;
  // Epsilon of the task's releases plus one release of `p` (+inf for a
  // round without noise). REQUIRES task.process_mu.
  absl::StatusOr<double> EpsilonWith(const Task& task, const proto::RoundParameters& p) const;
  // Charges one release of `p` to the task's accountant. REQUIRES process_mu.
  absl::Status ChargeRelease(Task& task, const proto::RoundParameters& p);
  // Loads the task's latest round from its store after a (re)start, counting
  // reports a crash left accepted but uncounted (a replica: those of its
  // own partial). Also the full refresh of a replica whose view is stale.
  // REQUIRES task.process_mu.
  absl::Status LoadLatestRoundLocked(Task& task);
  // Replicated stores only (else OK at once): reloads the task when the
  // store is at a later round than `round_id`'s view, or when `round_id`
  // is open here but was closed or released by another replica.
  // REQUIRES task.process_mu.
  absl::Status RefreshIfStale(Task& task, int64_t round_id);
  // The following REQUIRE task.process_mu held.
  absl::StatusOr<int> ProcessRoundLocked(Task& task, bool final_pass);
  // ProcessRoundLocked over a replicated store: leased batches.
  absl::StatusOr<int> ProcessLeasedLocked(Task& task, int64_t round_id, bool final_pass);
  // Reports per exchange with the helper in the task's round
  // (RoundCodec::ExchangeBatchSize of verify_batch_size).
  size_t ExchangeBatchSizeLocked(Task& task) const;
  // `seed_retry`: the helper answered with another query seed, which was
  // adopted; the batch is asked again once.
  absl::StatusOr<int> ProcessBatchLocked(Task& task, const std::vector<ReportRecord>& batch,
                                         bool final_pass, bool seed_retry = false);
  // Counts `ids` and rejects `rejected` in one store transaction (with an
  // accumulator checkpoint when due); `next` is the task's accumulator with
  // the shares of `ids` added (unused when ids is empty).
  absl::Status CommitLocked(Task& task, const std::vector<std::string>& ids,
                            std::vector<uint64_t> next, const std::vector<std::string>& rejected);
  // CommitLocked for stored records: their sum from the helper's tentative
  // aggregate where it holds them, else from their shares, parsed and
  // expanded here.
  absl::Status CommitRecordsLocked(Task& task, const std::vector<ReportRecord>& accepted,
                                   const std::vector<std::string>& rejected);
  // The parsed shares of `records` (reports of the task's round that keep
  // their share), in order: parsed from the record's share bytes when it
  // carries them, else from the upload cache, else read back from the store
  // (one GetReports for every miss) and parsed. An entry is INVALID_ARGUMENT
  // when its stored share no longer parses, DATA_LOSS when its stored
  // record is damaged (the batch is then read again report by report) and
  // NOT_FOUND when the store holds none; any other failing store read fails
  // the call.
  absl::StatusOr<std::vector<absl::StatusOr<std::shared_ptr<const ParsedShare>>>> SharesOfLocked(
      Task& task, absl::Span<const ReportRecord* const> records);
  // Saves the accumulator if it holds reports the stored snapshot lacks.
  absl::Status CheckpointLocked(Task& task);
  // Replicated stores: after a FAILED_PRECONDITION or ABORTED `status`
  // (another replica took reports or closed the round) reloads the task
  // from the store; returns `status` unchanged.
  absl::Status ResyncOnError(Task& task, absl::Status status);
  // Finalize's release (release.cc). Checks the batch size of `counted`
  // reports and the budget, then noises `share` in place.
  absl::Status NoiseReleaseLocked(Task& task, const proto::RoundParameters& params,
                                  int64_t counted, std::vector<uint64_t>& share);
  // Starts drawing the release noise of the open round `params` (a share
  // of `dimension` coordinates) into task.prepared_noise, unless it holds
  // that round's already, dropping any other; none for a round without
  // noise. At OpenRound, and at a load that finds the round open (after a
  // restart: the same draws from the same randomness as an uninterrupted
  // round). A failure is logged, not returned: the release then draws its
  // own.
  void PrepareNoiseLocked(Task& task, const proto::RoundParameters& params, uint64_t dimension);
  // The task's state after its store released `share` of `counted` reports.
  absl::Status MarkReleasedLocked(Task& task, const proto::RoundParameters& params,
                                  std::vector<uint64_t> share, int64_t counted);
  // One process: checkpoint, noise, ReleaseRound.
  absl::Status ReleaseLocked(Task& task, const proto::RoundParameters& params);
  // Replicas: adopt, checkpoint, sum the partials, noise, ReleaseSummed.
  absl::Status ReleasePartialsLocked(Task& task, const proto::RoundParameters& params);

  // This server's ledger line of one task, for its population's budget
  // (population.cc): the (q, z) of every round the task released, and of
  // the round it holds open, charged in advance (it may still be released).
  struct TaskLedger {
    std::vector<std::pair<double, double>> released;
    bool released_without_noise = false;  // epsilon = +inf
    int64_t open_round = 0;               // 0: none held open
    double open_q = 0;
    double open_z = 0;
    void Hold(int64_t round, double q, double z) {
      open_round = round;
      open_q = q;
      open_z = z;
    }
  };
  // Ledger bookkeeping (population.cc); ledger_mu_ is a leaf lock, taken
  // under any task's process_mu.
  void LedgerReset(const std::string& task_id) ABSL_LOCKS_EXCLUDED(ledger_mu_);
  void LedgerReleased(const std::string& task_id, double q, double z, int64_t round_id)
      ABSL_LOCKS_EXCLUDED(ledger_mu_);
  void LedgerHoldOpen(const std::string& task_id, double q, double z, int64_t round_id)
      ABSL_LOCKS_EXCLUDED(ledger_mu_);
  // The round no longer held open (abandoned): its charge is dropped.
  void LedgerDropHold(const std::string& task_id, int64_t round_id) ABSL_LOCKS_EXCLUDED(ledger_mu_);
  // Loads the other provisioned tasks of `task_id`'s population that have a
  // store (their released rounds), refreshing them first over a replicated
  // store. REQUIRES no task's process_mu held (it takes theirs).
  absl::Status LoadPopulationPeers(absl::string_view task_id);
  // FAILED_PRECONDITION when the population's epsilon, with every round its
  // tasks released or hold open and `p` in place of `task`'s open round,
  // would exceed task's budget; otherwise holds `p` open for `task`, in the
  // same critical section (two tasks of a population cannot both take the
  // last of its budget). REQUIRES task.process_mu.
  absl::Status ReservePopulationBudget(const Task& task, const proto::RoundParameters& p)
      ABSL_LOCKS_EXCLUDED(ledger_mu_);
  // Epsilon of the rounds `task`'s population released, at its delta.
  absl::StatusOr<double> PopulationSpent(const Task& task) ABSL_LOCKS_EXCLUDED(ledger_mu_);
  // The population's tasks (provisioned), or just `task_id` for an open
  // set's unlisted task.
  std::vector<std::string> PopulationTasks(absl::string_view task_id) const;

  const AggregatorOptions options_;  // options_.policies: the set at Create; see policies_
  mutable absl::Mutex policies_mu_;
  std::shared_ptr<const PolicySet> policies_ ABSL_GUARDED_BY(policies_mu_);
  StoreFactory store_factory_;
  PeerChannel* const peer_;
  Clock* const clock_;
  SecureRandom* const noise_random_;

  absl::Mutex tasks_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Task>> tasks_ ABSL_GUARDED_BY(tasks_mu_);
  absl::Mutex ledger_mu_;
  absl::flat_hash_map<std::string, TaskLedger> ledgers_ ABSL_GUARDED_BY(ledger_mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_AGGREGATOR_H_
