// One round's report encoding at one server (RoundParameters.encoding):
// PREAMBLE's block-sparse DPF keys (Asi et al., NeurIPS 2025) or dense
// additive shares (crypto/dense/dense_sharing.h), each with its norm-proof
// system when the round has a bound. Every step that touches a share
// (upload validation, the stored blob, parsing it back, the one evaluation
// per report in Verify, taking a share back out, the commit) goes through
// here, so both encodings share the rest of the aggregator: tickets, device
// signatures, the store, the Verify exchange, noise and accounting.
//
// In a dense round the check value both servers compare is
// DenseSharing::round_digest() (a dense sharing has no structure to check);
// the norm proof, whose joint randomness binds both servers' shares, is
// what rejects a bad report.
//
// Immutable after creation; thread-safe; shared by concurrent uploads.
#ifndef TANDEM_AGGREGATOR_CORE_ROUND_CODEC_H_
#define TANDEM_AGGREGATOR_CORE_ROUND_CODEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "aggregator/core/norm_verification.h"
#include "crypto/dense/dense_sharing.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/dense_norm_proof.h"
#include "crypto/proof/norm_proof.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {

class RoundCodec {
 public:
  // A PREAMBLE round: its DPF and (norm-bound rounds) proof system.
  static std::shared_ptr<const RoundCodec> Preamble(
      crypto::SparseDpf dpf, std::shared_ptr<const crypto::proof::NormProofSystem> proof,
      int party);
  // A dense round of p.dimension() values at p.group_parameters().value_bits,
  // with a proof system when p has a norm_bound. INVALID_ARGUMENT for a
  // width other than 32 or 64, or a bound crypto/proof rejects (dense proofs
  // take D <= 2^20).
  static absl::StatusOr<std::shared_ptr<const RoundCodec>> Dense(const proto::RoundParameters& p,
                                                                 int party);

  bool dense() const { return sharing_.has_value(); }
  uint64_t dimension() const;
  int value_bits() const;
  bool has_proof() const { return proof_ != nullptr || dense_proof_.has_value(); }
  // PREAMBLE rounds only (null / empty in dense ones).
  const crypto::SparseDpf* dpf() const { return dpf_ ? &*dpf_ : nullptr; }
  const crypto::proof::NormProofSystem* proof() const { return proof_.get(); }
  // Field elements of one report's verifier share (0 without a norm bound):
  // what each report adds to an exchange with the helper.
  size_t VerifierElements() const;
  // Reports per exchange with the helper: `max_reports`, or fewer (at least
  // one) where their verifier shares would exceed `max_bytes`. The default
  // is half of a helper daemon's peer receive limit (round_codec.cc).
  static constexpr size_t kMaxVerifierBytesPerExchange = size_t{16} << 20;
  size_t ExchangeBatchSize(int max_reports, size_t max_bytes = kMaxVerifierBytesPerExchange) const;

  // INVALID_ARGUMENT unless the upload carries exactly this round's kind of
  // share (key_share or dense_share), well formed for this server, and a
  // proof share iff the round has a norm bound.
  absl::Status ValidateUpload(const proto::UploadRequest& request) const;
  // The blob stored for a validated upload (what the device signed the
  // digest of: crypto/sign/device_auth.h).
  std::string EncodeStored(const proto::UploadRequest& request,
                           absl::string_view ticket_digest) const;
  // ShareDigest(stored) of what EncodeStored writes (`stored`), from the
  // request: the content digest the device signed. PREAMBLE rounds hash the
  // public parts once into *public_digest (their P) and the rest of the
  // share; dense rounds hash `stored`. INTERNAL if OpenSSL fails.
  absl::StatusOr<std::string> StoredDigest(const proto::UploadRequest& request,
                                           absl::string_view ticket_digest,
                                           absl::string_view stored,
                                           std::optional<crypto::ProofDigest>* public_digest) const;
  // Copies a validated upload's share and proof into `parsed`.
  void CopyInto(const proto::UploadRequest& request, ParsedShare* parsed) const;
  // Parses and validates a stored blob (`ticketed`: the server stores
  // ticketed uploads). INVALID_ARGUMENT when it does not parse or validate.
  absl::StatusOr<ParsedShare> ParseStored(absl::string_view blob, bool ticketed) const;

  // Each report's check value and, with a norm bound, verifier share, from
  // one evaluation per report, added into `accumulator` when it is not
  // empty (dimension() entries). Errors of the first failing report; the
  // accumulator then holds a partial sum and must be discarded.
  absl::StatusOr<ReportChecks> Evaluate(absl::Span<const ParsedShare* const> shares,
                                        absl::Span<const std::string> report_ids,
                                        absl::string_view query_seed,
                                        absl::Span<uint64_t> accumulator) const;
  // Both servers' verdict on a report's verifier shares (true in rounds
  // without a bound).
  bool Decide(const proto::NormProofVerifierShare& a, const proto::NormProofVerifierShare& b) const;
  // accumulator += (-= when `subtract`) the shares, mod 2^value_bits. On
  // error the accumulator must be discarded.
  absl::Status Accumulate(absl::Span<const ParsedShare* const> shares,
                          absl::Span<uint64_t> accumulator, bool subtract) const;

 private:
  explicit RoundCodec(int party) : party_(party) {}
  absl::StatusOr<ReportChecks> EvaluateDense(absl::Span<const ParsedShare* const> shares,
                                             absl::Span<const std::string> report_ids,
                                             absl::string_view query_seed,
                                             absl::Span<uint64_t> accumulator) const;

  int party_;
  std::optional<crypto::SparseDpf> dpf_;
  crypto::ExpectedKeySetShape shape_;
  std::shared_ptr<const crypto::proof::NormProofSystem> proof_;
  std::optional<crypto::DenseSharing> sharing_;
  std::optional<crypto::proof::DenseNormProof> dense_proof_;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_ROUND_CODEC_H_
