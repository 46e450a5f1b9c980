// Client side of PREAMBLE (Asi, Feldman, Keller, Rothblum, Talwar, NeurIPS
// 2025), partition variant: turn a model update into the two aggregators'
// k-block-sparse DPF key shares.
//
//   1. clip the whole update to L2 norm C and encode it in fixed point
//      (crypto/fixed_point: round(x * 2^f) in Z_2^64);
//   2. in each of the k groups of D/k coordinates, pick one block of B
//      coordinates: uniformly at random (SecureRandom; the round's
//      block_selection RANDOM, the paper's secret sampling pattern), or the
//      block of largest L2 norm (TOP_NORM; block_selection.h: then the
//      selected blocks, not the whole update, are clipped to C, and the
//      caller keeps the unsent rest as its error-feedback residual);
//   3. generate the k block-DPF key pairs of those blocks (crypto/dpf);
//   4. when the round has a norm bound, prove that every sent block and the
//      whole report are within it (crypto/proof/norm_proof.h): one proof
//      share per server, uploaded beside its keys.
//
// Design choice [I]: the paper scales the sampled blocks by Delta/k so that
// the sparse vector is an unbiased estimate of the update. We send them
// unscaled and let the coordinator multiply the decoded sum by
// blocks_per_group (= Delta/k). That is post-processing, so each report's L2
// sensitivity stays C (not C * Delta/k) and the noise is calibrated to C.
//
// Immutable after Create; thread-safe for const use.
#ifndef TANDEM_CLIENT_INTERNAL_REPORT_BUILDER_H_
#define TANDEM_CLIENT_INTERNAL_REPORT_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "client/internal/block_selection.h"
#include "crypto/dense/dense_sharing.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/fixed_point/fixed_point.h"
#include "crypto/proof/dense_norm_proof.h"
#include "crypto/proof/norm_proof.h"
#include "proto/aggregator.pb.h"
#include "proto/dpf.pb.h"

namespace tandem::client {

struct ReportParameters {
  uint64_t dimension = 0;       // D (the update is zero-padded up to D)
  uint32_t block_size = 0;      // B
  uint32_t num_groups = 0;      // k
  uint32_t log_num_blocks = 0;  // d: D = k * 2^d * B
  int frac_bits = 16;           // fixed-point fraction bits
  double clip_l2_norm = 1.0;    // C
  uint64_t max_summands = 1;    // reports per round the sum must hold without wrap
  // Largest D accepted (the client's bound on what a coordinator may ask:
  // the builder allocates O(D)). Matches the aggregators' default policy.
  uint64_t max_dimension = uint64_t{1} << 24;
  // Norm proofs (the round's norm_bound); unset = no proof, as before.
  std::optional<proto::NormBoundParameters> norm_bound;
  // RoundParameters.block_selection.
  proto::BlockSelection block_selection = proto::BLOCK_SELECTION_RANDOM;
  // RoundParameters.encoding. DENSE: the whole clipped update is shared
  // additively (crypto/dense/dense_sharing.h) at `value_bits`; the block
  // parameters and the selection are not used.
  proto::ReportEncoding encoding = proto::REPORT_ENCODING_PREAMBLE;
  int value_bits = 64;  // the ring Z_2^w of the shares: 32 or 64 (group_parameters)
};

// The report parameters of a round as the coordinator announces it
// (dimension, groups, blocks, fixed point; max_reports as the summand bound).
ReportParameters ReportParametersFromRound(const proto::RoundParameters& round);

struct BuiltReport {
  std::string report_id;  // 16 bytes: the upload ticket's id, or random (idempotency key)
  proto::SparseKeySet leader_share;  // PREAMBLE rounds
  proto::SparseKeySet helper_share;
  // Dense rounds: each server's DenseShare (the key shares are then empty).
  std::optional<proto::DenseShare> leader_dense;
  std::optional<proto::DenseShare> helper_dense;
  double clip_factor = 1.0;   // min(1, C / ||update||)
  uint64_t upload_bytes = 0;  // serialized size of both shares (and proofs)
  // Rounds with a norm bound: each server's proof share (UploadRequest.
  // norm_proof); unset otherwise.
  std::optional<proto::NormProofShare> leader_proof;
  std::optional<proto::NormProofShare> helper_proof;
  // P of leader_share (crypto/dpf/public_digest.h) when the norm proof
  // hashed it: the device's signatures reuse it (UploadRequests).
  std::optional<crypto::ProofDigest> public_digest;
  // The block sent from each group (k entries). Client-secret: never
  // uploaded in the clear; the caller needs it for the error-feedback
  // residual (UnsentResidual).
  std::vector<uint32_t> block_indices;
};

class ReportBuilder {
 public:
  // INVALID_ARGUMENT for inconsistent parameters or D above max_dimension
  // (see SparseDpf::Create, FixedPointCodec::Create and
  // NormProofSystem::Create); checked before anything of size D is allocated.
  static absl::StatusOr<ReportBuilder> Create(const ReportParameters& p);

  // `update` has at most D entries (the rest is zero). INVALID_ARGUMENT for
  // a longer update, non-finite values, or (norm-bound rounds) encoded
  // blocks over the round's bound; `rng` errors propagate.
  absl::StatusOr<BuiltReport> Build(absl::Span<const float> update, SecureRandom* rng) const;
  // As above, under the given report id (16 bytes: the upload ticket's
  // ticket_id, which norm proofs then bind); empty = 16 random bytes.
  // INVALID_ARGUMENT for another length.
  absl::StatusOr<BuiltReport> Build(absl::Span<const float> update, SecureRandom* rng,
                                    absl::string_view report_id) const;

  // PREAMBLE rounds only: REQUIRES !dense().
  const crypto::SparseDpf& dpf() const { return *dpf_; }
  bool dense() const { return sharing_.has_value(); }
  const crypto::FixedPointCodec& codec() const { return codec_; }
  BlockGeometry geometry() const;
  proto::BlockSelection block_selection() const { return selection_; }

 private:
  ReportBuilder(std::optional<crypto::SparseDpf> dpf, crypto::FixedPointCodec codec,
                std::optional<crypto::proof::NormProofSystem> proof,
                proto::BlockSelection selection)
      : dpf_(std::move(dpf)),
        codec_(std::move(codec)),
        proof_(std::move(proof)),
        selection_(selection) {}
  // A dense round of p.dimension values.
  static absl::StatusOr<ReportBuilder> CreateDense(const ReportParameters& p);
  absl::StatusOr<BuiltReport> BuildDense(absl::Span<const float> padded, SecureRandom* rng,
                                         BuiltReport report) const;
  // The selected block of each group (RANDOM: by rejection from `rng`).
  absl::StatusOr<std::vector<uint32_t>> SelectBlocks(absl::Span<const float> padded,
                                                     SecureRandom* rng) const;
  std::optional<crypto::SparseDpf> dpf_;  // PREAMBLE rounds
  crypto::FixedPointCodec codec_;
  std::optional<crypto::proof::NormProofSystem> proof_;
  proto::BlockSelection selection_;
  std::optional<crypto::DenseSharing> sharing_;               // dense rounds
  std::optional<crypto::proof::DenseNormProof> dense_proof_;  // dense rounds with a bound
};

// The participants' build step: `builder.Build(update, rng, report_id)`,
// with error feedback in TOP_NORM rounds when `memory` is not null: the
// memory of `task_id` (loaded from `store` when there is one) is added to
// the update first, and the new residual (UnsentResidual of the compensated
// update) is kept in `memory` and saved to `store` before returning (see
// LoadErrorFeedback for the crash window). RANDOM rounds ignore the memory.
// Errors of Build and of the store propagate; the memory is unchanged then.
absl::StatusOr<BuiltReport> BuildWithErrorFeedback(const ReportBuilder& builder,
                                                   absl::string_view task_id,
                                                   absl::Span<const float> update,
                                                   SecureRandom* rng, absl::string_view report_id,
                                                   ErrorFeedback* memory, StateStore* store);

// The two servers' UploadRequests of `report` in round `round_id` of
// `task_id`: the shared report id, each server's key share and, in
// norm-bound rounds, its proof share. Consumes the report's shares.
struct UploadRequests {
  proto::UploadRequest to_leader;
  proto::UploadRequest to_helper;
  // BuiltReport::public_digest: P of to_leader's key share, for
  // crypto::SignUploadPair; unset when the report computed none.
  std::optional<crypto::ProofDigest> public_digest;
};
UploadRequests MakeUploadRequests(BuiltReport report, const std::string& task_id,
                                  uint64_t round_id);
// As above, with the assignment's upload ticket in both requests (field 6;
// the aggregators refuse a ticketed deployment's uploads without it). The
// report should have been built under the ticket's id (Build(..., id)).
UploadRequests MakeUploadRequests(BuiltReport report, const std::string& task_id, uint64_t round_id,
                                  const proto::SignedUploadTicket& ticket);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_REPORT_BUILDER_H_
