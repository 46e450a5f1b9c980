// Durable state of one aggregator for one task: rounds, reports (with replay
// protection) and accumulator snapshots.
//
// Report lifecycle (the only transitions):
//
//     PutPending ──> kPending ──MarkAccepted / CommitDecisions──> kAccepted ──SaveAccumulator──> kAccepted+counted
//                        ├──────────────CommitBatch (decided and counted at once)──────────────────┘
//                        └──────MarkRejected / CommitDecisions / CommitBatch──> kRejected
//
// Report ids are global to the store (one store per task), so an id seen in
// any round is refused in every later round (replay protection). PutPending
// is idempotent for identical content (same round, same share bytes);
// repeating the transition a report is already in is a no-op, so a daemon
// can safely retry after a crash.
//
// Crash invariant (what an implementation must guarantee): SaveAccumulator
// writes the accumulator bytes and marks the included reports counted in one
// atomic step, so after any crash the stored accumulator contains exactly the
// reports marked counted: none lost, none counted twice. Reports accepted but
// not yet counted keep their share so a restarted daemon can re-accumulate
// them (ListReports(round, kAcceptedUncounted)); counted and rejected reports
// drop their share and keep only its SHA-256 digest (for idempotency checks).
//
// Thread safety: implementations are thread-safe (each call is atomic).
// Error codes shared by all implementations:
//   INVALID_ARGUMENT   malformed argument (empty or > kMaxReportIdBytes id,
//                      negative round, share > kMaxShareBytes, duplicate ids)
//   NOT_FOUND          unknown round or report
//   ALREADY_EXISTS     OpenRound with different parameters; PutPending of a
//                      known id with a different round or content (replay)
//   FAILED_PRECONDITION round closed; forbidden transition; SaveAccumulator
//                      of a report that is not accepted/uncounted in that round
//   DATA_LOSS          stored data fails validation (corruption)
//   UNAVAILABLE / INTERNAL  storage failures (retryable / not)
#ifndef TANDEM_AGGREGATOR_STORE_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_REPORT_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem::aggregator {

inline constexpr size_t kMaxReportIdBytes = 128;
inline constexpr size_t kMaxShareBytes = size_t{64} << 20;       // 64 MiB
inline constexpr size_t kMaxParametersBytes = size_t{1} << 20;   // 1 MiB
inline constexpr size_t kMaxAccumulatorBytes = size_t{1} << 30;  // 1 GiB

// kClosed: closed without release (abandoned); kReleased: closed with its
// noised share saved by ReleaseRound (the rounds an accountant charges).
enum class RoundState { kOpen = 0, kClosed = 1, kReleased = 2 };
enum class ReportState { kPending = 0, kAccepted = 1, kRejected = 2 };
// Selects reports for ListReports.
enum class ReportFilter { kPending, kAcceptedUncounted, kCounted, kRejected, kAll };

struct RoundRecord {
  int64_t round_id = 0;
  std::string parameters;  // Serialized round parameters (opaque bytes).
  RoundState state = RoundState::kOpen;
};

struct ReportRecord {
  std::string report_id;
  int64_t round_id = 0;
  ReportState state = ReportState::kPending;
  bool counted = false;      // Included in the round's accumulator snapshot.
  std::string share_digest;  // SHA-256 of the share (32 bytes).
  std::string share;         // Empty once counted (secret: never log).
};

// Report counts of one round by state (Status reads these, not the shares).
struct ReportCounts {
  int64_t pending = 0;
  int64_t accepted = 0;
  int64_t rejected = 0;
};

struct PendingReport {
  std::string report_id;
  std::string share;
  // ShareDigest(share) when the caller computed it already (an upload
  // thread, in parallel with the others), else empty. A store may use it
  // instead of hashing the share again; it must be exactly that digest.
  std::string share_digest;
};

// r.share_digest when set, else ShareDigest(r.share).
std::string DigestOf(const PendingReport& r);

struct AccumulatorSnapshot {
  int64_t round_id = 0;
  std::string bytes;         // Opaque accumulator encoding (secret share).
  int64_t report_count = 0;  // Reports counted into `bytes`.
  int64_t version = 0;       // Number of snapshots saved (0: none yet).
};

// One replica's share of a round's accumulator (ReplicatedWork).
struct PartialAccumulator {
  std::string replica_id;
  std::string bytes;         // Opaque accumulator encoding (secret share).
  int64_t report_count = 0;  // Reports counted into `bytes`.
  int64_t version = 0;
};

// The work-sharing operations of a store that several replicas of one
// aggregator use at once (issue 24; PostgresReportStore with a replica id).
// Seen through such a store, the accumulator calls of ReportStore
// (SaveAccumulator, CommitBatch, LoadAccumulator) act on THIS replica's
// partial accumulator, ListReports(kAcceptedUncounted) lists the reports
// this replica accepted, and every transition refuses (FAILED_PRECONDITION)
// a report another replica holds: a pending report leased to another
// replica, or an accepted one in another replica's partial. A report is
// thus counted in exactly one partial, even when a slow replica and the one
// that took its expired lease both try.
//
// Thread safety: as ReportStore. Errors as ReportStore's.
class ReplicatedWork {
 public:
  virtual ~ReplicatedWork() = default;
  virtual const std::string& replica_id() const = 0;
  // Leases up to `limit` pending reports of the open round to this replica
  // (free ones, or ones whose lease expired; with `steal`, also those
  // another replica leases now: Finalize's last pass) and returns them with
  // their shares, ordered by report id. Replicas claiming at once get
  // disjoint batches (FOR UPDATE SKIP LOCKED). Empty when none is left.
  virtual absl::StatusOr<std::vector<ReportRecord>> ClaimPending(int64_t round_id, int limit,
                                                                 bool steal) = 0;
  // Gives back this replica's leases on `ids` (those still pending), so
  // another replica may claim them at once.
  virtual absl::Status ReleaseLeases(int64_t round_id, absl::Span<const std::string> ids) = 0;
  // Moves every accepted-uncounted report of the round that another replica
  // holds (alive or dead) to this one and returns them with their shares:
  // the caller expands them into its own partial before its next save.
  // The other replica's later save of them is refused.
  virtual absl::StatusOr<std::vector<ReportRecord>> AdoptUncounted(int64_t round_id) = 0;
  // Every replica's partial accumulator of the round, by replica id.
  virtual absl::StatusOr<std::vector<PartialAccumulator>> ListPartials(int64_t round_id) = 0;
  // ReleaseRound for the sum of the partials: releases `bytes` only if, in
  // the same transaction, the round has no accepted-uncounted report and
  // exactly `counted` counted reports (the partials summed are the current
  // ones); ABORTED otherwise (a replica committed in between: sum again).
  virtual absl::Status ReleaseSummed(int64_t round_id, absl::string_view bytes,
                                     int64_t counted) = 0;
};

class ReportStore {
 public:
  virtual ~ReportStore() = default;

  // Opens round `round_id` with its serialized parameters. Idempotent for
  // identical parameters while open; ALREADY_EXISTS for different
  // parameters; FAILED_PRECONDITION when the round was closed.
  virtual absl::Status OpenRound(int64_t round_id, absl::string_view parameters) = 0;
  // Closes the round (idempotent; a released round stays released); later
  // writes to it fail with FAILED_PRECONDITION. NOT_FOUND for an unknown round.
  virtual absl::Status CloseRound(int64_t round_id) = 0;
  // The release, in one transaction: the accumulator bytes become `bytes`
  // (the noised share; the counted reports stay as they are) and the round
  // becomes kReleased. FAILED_PRECONDITION unless the round is open, so a
  // crash leaves either an open round with its un-noised accumulator or the
  // released share, never a noised open round.
  virtual absl::Status ReleaseRound(int64_t round_id, absl::string_view bytes) = 0;
  // The release of a round whose last accepted reports are not counted
  // yet: `newly_counted` (accepted, uncounted, in this round) become
  // counted and drop their shares, and the round is released with
  // `released` (the noised share of an accumulator that includes them),
  // as SaveAccumulator(round_id, counted, newly_counted) then
  // ReleaseRound(round_id, released). The SQLite and segment stores do it in one
  // transaction (one sync of each file instead of two, on the round
  // boundary every client waits on): a crash leaves the open round with
  // those reports accepted and keeping their shares, or the released
  // round. `counted` (the un-noised accumulator) is what the two-step
  // default saves first; a store in one transaction never writes it.
  // Errors as SaveAccumulator and ReleaseRound.
  virtual absl::Status CountAndRelease(int64_t round_id, absl::string_view counted,
                                       absl::Span<const std::string> newly_counted,
                                       absl::string_view released);
  virtual absl::StatusOr<RoundRecord> GetRound(int64_t round_id) = 0;
  // The round's secret (the helper's FLP query seed, crypto/proof/flp.h):
  // the first call stores `secret` durably and returns it; every later call
  // returns that first secret, whatever it is given, also after a restart.
  // INVALID_ARGUMENT for an empty or > 1 KiB secret; NOT_FOUND unknown
  // round; FAILED_PRECONDITION for a round that is not open and has none.
  virtual absl::StatusOr<std::string> BindRoundSecret(int64_t round_id,
                                                      absl::string_view secret) = 0;
  // Every round of the store, ordered by round id (a restarted daemon finds
  // its latest round here).
  virtual absl::StatusOr<std::vector<RoundRecord>> ListRounds() = 0;

  // Records a received report as pending. See the file comment for
  // idempotency and replay refusal. REQUIRES the round to be open.
  virtual absl::Status PutPending(int64_t round_id, absl::string_view report_id,
                                  absl::string_view share) = 0;
  // Group commit: PutPending of every report in one transaction (one fsync).
  // Returns one status per report, as PutPending would have returned it
  // (OK, ALREADY_EXISTS, INVALID_ARGUMENT); the call itself fails, storing
  // nothing, for an unknown or closed round or a storage error.
  virtual absl::StatusOr<std::vector<absl::Status>> PutPendingBatch(
      int64_t round_id, absl::Span<const PendingReport> reports) = 0;
  // pending -> accepted / pending -> rejected. A repeat of the same
  // transition is OK; any other is FAILED_PRECONDITION.
  virtual absl::Status MarkAccepted(absl::string_view report_id) = 0;
  virtual absl::Status MarkRejected(absl::string_view report_id) = 0;
  virtual absl::StatusOr<ReportRecord> GetReport(absl::string_view report_id) = 0;
  // GetReport of every id at once (one query where the store can: the
  // helper's Verify and commit look up a whole batch). Unknown ids are
  // absent from the map; INVALID_ARGUMENT for a malformed id.
  virtual absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> GetReports(
      absl::Span<const std::string> report_ids);
  // Counts of the round's reports by state, without reading any share.
  virtual absl::StatusOr<ReportCounts> CountReports(int64_t round_id) = 0;
  // Reports of one round matching `filter`, ordered by report id.
  virtual absl::StatusOr<std::vector<ReportRecord>> ListReports(int64_t round_id,
                                                                ReportFilter filter) = 0;
  // GetReports / ListReports without the shares (ReportRecord::share left
  // empty; id, round, state, counted and digest as stored): what the
  // verification's bookkeeping needs when it holds the parsed shares already
  // (aggregator/core/share_cache.h). The defaults read the shares and drop
  // them; stores that keep shares apart from their rows skip the reads.
  // Errors as GetReports / ListReports.
  virtual absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> GetReportStates(
      absl::Span<const std::string> report_ids);
  virtual absl::StatusOr<std::vector<ReportRecord>> ListReportStates(int64_t round_id,
                                                                     ReportFilter filter);

  // Atomically replaces the round's accumulator with `bytes`, which must
  // already include the reports `newly_counted` (accepted, uncounted, in
  // this round) on top of those counted before; marks them counted and
  // drops their shares. All or nothing. An empty `newly_counted` only
  // rewrites the bytes.
  virtual absl::Status SaveAccumulator(int64_t round_id, absl::string_view bytes,
                                       absl::Span<const std::string> newly_counted) = 0;
  // One decided batch in one transaction: every report of `accept_and_count`
  // (pending or accepted-uncounted, in this round) becomes accepted and
  // counted, every report of `reject` (pending, or already rejected: no-op)
  // becomes rejected, shares are dropped, and -- when accept_and_count is
  // not empty -- the accumulator is replaced by `bytes`, which must already
  // include them. All or nothing: FAILED_PRECONDITION when any report is in
  // another state or round, INVALID_ARGUMENT for duplicate or bad ids.
  virtual absl::Status CommitBatch(int64_t round_id, absl::string_view bytes,
                                   absl::Span<const std::string> accept_and_count,
                                   absl::Span<const std::string> reject) = 0;
  // One decided batch whose accumulator is not saved yet (the aggregator
  // checkpoints its accumulator every few batches, not every batch): every
  // report of `accept` (pending, or already accepted: no-op) becomes
  // accepted and stays uncounted, KEEPING its share, so a restarted daemon
  // re-accumulates it from ListReports(round, kAcceptedUncounted); every
  // report of `reject` (pending, or already rejected) becomes rejected and
  // drops its share. A later SaveAccumulator or CommitBatch counts the
  // accepted ones. All or nothing, in one transaction; errors as CommitBatch
  // (FAILED_PRECONDITION when any report is in another state or round).
  virtual absl::Status CommitDecisions(int64_t round_id, absl::Span<const std::string> accept,
                                       absl::Span<const std::string> reject) = 0;
  // The latest snapshot (version 0, empty bytes before the first save).
  // Replicated stores: this replica's partial, or for a released round the
  // released share with the round's whole report count.
  virtual absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t round_id) = 0;

  // Non-null when several replicas share this store's task (not owned; as
  // long-lived as the store). The embedded stores have one process each.
  virtual ReplicatedWork* replicated() { return nullptr; }
};

// The digest of a stored share, as kept in ReportRecord::share_digest: for
// a StoredReportShare holding a key set (what aggregators store of a
// PREAMBLE upload: aggregator/core/norm_verification.h EncodeStoredShare),
// the upload's content digest (crypto::UploadContentDigest: the device
// signed it, and its public-parts digest is the VDPF's, so a server hashes
// each share's bytes once); for any other bytes (dense shares, tests'
// blobs, bare key sets of older stores) SHA-256 of the bytes
// (crypto::Sha256Digest). A pure function of
// the bytes; an upload path that computed it from the request passes it in
// PendingReport::share_digest instead.
std::string ShareDigest(absl::string_view share);

// Argument checks shared by the implementations (INVALID_ARGUMENT).
absl::Status ValidateRoundId(int64_t round_id);
absl::Status ValidateReportId(absl::string_view report_id);
absl::Status ValidateShare(absl::string_view share);
absl::Status ValidateParameters(absl::string_view parameters);
absl::Status ValidateRoundSecret(absl::string_view secret);
// A replica id (ReplicatedWork): 1 to 63 bytes of [A-Za-z0-9._-].
absl::Status ValidateReplicaId(absl::string_view replica_id);
absl::Status ValidateAccumulatorUpdate(absl::string_view bytes,
                                       absl::Span<const std::string> newly_counted);
// CountAndRelease arguments: a valid round id, ValidateAccumulatorUpdate of
// (counted, newly_counted) and of `released`.
absl::Status ValidateCountAndRelease(int64_t round_id, absl::string_view counted,
                                     absl::Span<const std::string> newly_counted,
                                     absl::string_view released);
// CommitBatch arguments: valid ids, no id twice across both lists, bytes
// within kMaxAccumulatorBytes.
absl::Status ValidateCommitBatch(absl::string_view bytes,
                                 absl::Span<const std::string> accept_and_count,
                                 absl::Span<const std::string> reject);

// Checks of stored data shared by the implementations, DATA_LOSS
// "report store: corrupt <what>" when they fail.
absl::Status CorruptStore(absl::string_view what);
// A report row read back: `r` holds its id, round and digest as stored,
// `state` and `counted` the stored integers (counted: 0 or 1); on success
// sets r->state and r->counted. Checks the id and round, the state, that a
// counted report is accepted and that the digest has 32 bytes.
absl::Status CheckStoredReportRow(int64_t state, int64_t counted, ReportRecord* r);
// Adds `n` reports of the stored state integer `state` to `counts`
// (CountReports); DATA_LOSS for an unknown state.
absl::Status AddStateCount(int64_t state, int64_t n, ReportCounts* counts);
// True for the reports that keep their share (pending, or accepted and not
// yet counted).
bool KeepsShare(const ReportRecord& r);
// The share read back with the row: within kMaxShareBytes and, for a report
// that keeps its share, matching its digest.
absl::Status CheckStoredShare(const ReportRecord& r);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_REPORT_STORE_H_
