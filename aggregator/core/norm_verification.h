// Norm-bound proof checks of one server in the Verify exchange
// (crypto/proof/norm_proof.h): for rounds with RoundParameters.norm_bound,
// each report's share is evaluated over the full domain once
// (NormProofSystem::EvaluateAndDerive, or EvaluateAccumulateAndDerive when
// the caller accumulates in the same pass), which gives both the VDPF digest
// (the same bytes as SparseDpf::ComputeProofDigest) and the derived shares
// the proof is checked on, from per-group block sums added inside the AES
// kernel (no D-sized buffer); the server's verifier share is computed at the
// round's query seed. oneTBB across reports.
//
// Also the stored form of proved uploads (proto StoredReportShare).
// Pure functions over caller-owned data; thread-safe.
#ifndef TANDEM_AGGREGATOR_CORE_NORM_VERIFICATION_H_
#define TANDEM_AGGREGATOR_CORE_NORM_VERIFICATION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/norm_proof.h"
#include "google/protobuf/arena.h"
#include "proto/aggregator.pb.h"
#include "proto/dpf.pb.h"

namespace tandem::aggregator {

// A stored share, parsed and validated: keys, plus the proof share in
// rounds with a norm bound. Move-only. The messages live on the heap, or on
// an arena owned here (ParsedShare(arena_bytes)): an upload's copy of its
// ~134 KB key set is then one block, not a heap allocation per key field,
// and freeing it is one free; or they are an upload request's own, parsed
// onto an arena that this share then keeps alive (the daemon's upload
// service: no copy, and no free per field on the verification thread).
// Not thread-safe to mutate; const access is.
class ParsedShare {
 public:
  // Empty messages on the heap.
  ParsedShare();
  // Empty messages on an arena whose first block has `arena_bytes` (the
  // size of what will be copied in: then one allocation holds it all).
  explicit ParsedShare(size_t arena_bytes);
  // The key set, proof and dense share of `*request`, which lives on
  // `arena` (REQUIRES: request->GetArena() == arena.get()); shares
  // ownership of the arena, so the request outlives every other owner's
  // release of it. The request's other fields stay on the arena, unread.
  ParsedShare(std::shared_ptr<google::protobuf::Arena> arena, proto::UploadRequest* request);
  ParsedShare(ParsedShare&&) noexcept = default;
  ParsedShare& operator=(ParsedShare&&) noexcept = default;
  ~ParsedShare();

  const proto::SparseKeySet& keys() const { return *keys_; }
  proto::SparseKeySet* mutable_keys() { return keys_; }
  const proto::NormProofShare& proof() const { return *proof_; }
  proto::NormProofShare* mutable_proof() { return proof_; }
  // Dense rounds: this server's DenseShare (keys() is then empty).
  const proto::DenseShare& dense() const { return *dense_; }
  proto::DenseShare* mutable_dense() { return dense_; }

  // Bytes of the arena's blocks (0 for heap messages): what the share holds
  // in memory when that is more than its stored size (an upload's arena's
  // blocks grow geometrically from UploadArenaOptions' first one).
  int64_t arena_bytes() const {
    return arena_ != nullptr ? static_cast<int64_t>(arena_->SpaceAllocated()) : 0;
  }

  std::string ticket_digest;  // empty for unticketed uploads
  // crypto::PublicPartsDigest(keys()) when the upload hashed it already (its
  // content digest starts from it); absent for shares read from the store,
  // whose verification hashes it. Set before the share is shared.
  std::optional<crypto::ProofDigest> public_digest;

 private:
  // Declared first: destroyed after the messages that may live on it.
  std::shared_ptr<google::protobuf::Arena> arena_;  // null: heap messages
  std::unique_ptr<proto::SparseKeySet> heap_keys_;
  std::unique_ptr<proto::NormProofShare> heap_proof_;
  std::unique_ptr<proto::DenseShare> heap_dense_;
  proto::SparseKeySet* keys_;     // heap_keys_ or on arena_
  proto::NormProofShare* proof_;  // heap_proof_ or on arena_
  proto::DenseShare* dense_;      // heap_dense_ or on arena_
};

// share.public_digest as a pointer (null when absent).
const crypto::ProofDigest* PublicDigestOf(const ParsedShare& share);

// The blob a server stores for an upload: a StoredReportShare (the key set,
// the proof share and the ticket digest where the round has them), whose
// content digest (crypto::UploadContentDigest) is the store's ShareDigest.
// Stores written before 2026-12-07 may hold bare key sets of rounds without
// bound or ticket; ParseStoredShare still reads them. Dense uploads:
// EncodeStoredDenseShare, also a StoredReportShare.
std::string EncodeStoredShare(const proto::SparseKeySet& keys, const proto::NormProofShare* proof,
                              absl::string_view ticket_digest);
std::string EncodeStoredDenseShare(const proto::DenseShare& share,
                                   const proto::NormProofShare* proof,
                                   absl::string_view ticket_digest);

// Parses and validates a stored blob. `proof` is the round's proof system
// (null for rounds without norm bound); `party` is this server's.
// `ticketed`: the server stores ticketed uploads (then every blob is a
// StoredReportShare with a 32-byte ticket digest). INVALID_ARGUMENT when it
// does not parse or validate.
absl::StatusOr<ParsedShare> ParseStoredShare(absl::string_view blob,
                                             const crypto::ExpectedKeySetShape& shape,
                                             const crypto::proof::NormProofSystem* proof,
                                             int party, bool ticketed);

struct NormEvaluation {
  crypto::ProofDigest digest;
  proto::NormProofVerifierShare verifier;
};

// Digest and verifier share of every report, in order. With `accumulator`
// non-empty (dpf.dimension() entries) the same single evaluation per
// report also adds its shares into it (NormProofSystem::
// EvaluateAccumulateAndDerive; expansion.h). Errors of the first failing
// report (INVALID_ARGUMENT for malformed data); the accumulator then holds
// a partial sum and must be discarded.
absl::StatusOr<std::vector<NormEvaluation>> EvaluateNormChecks(
    const crypto::SparseDpf& dpf, const crypto::proof::NormProofSystem& proof, int party,
    absl::Span<const ParsedShare* const> shares, absl::Span<const std::string> report_ids,
    absl::string_view query_seed, absl::Span<uint64_t> accumulator = absl::Span<uint64_t>());

// What a server sends its peer for each report of an exchange: the VDPF
// digest and, in norm rounds (`proof` non-null), its verifier share, one
// evaluation per report (added into `accumulator` when non-empty:
// ComputeDigests / EvaluateNormChecks). verifiers is empty without proof.
// Errors as theirs; on error the accumulator must be discarded.
struct ReportChecks {
  std::vector<crypto::ProofDigest> digests;
  std::vector<proto::NormProofVerifierShare> verifiers;
};
absl::StatusOr<ReportChecks> EvaluateReportChecks(
    const crypto::SparseDpf& dpf, const crypto::proof::NormProofSystem* proof, int party,
    absl::Span<const ParsedShare* const> shares, absl::Span<const std::string> report_ids,
    absl::string_view query_seed, absl::Span<uint64_t> accumulator);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_NORM_VERIFICATION_H_
