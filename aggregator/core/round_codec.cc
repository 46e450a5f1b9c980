#include "aggregator/core/round_codec.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "aggregator/core/expansion.h"
#include "aggregator/store/report_store.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator {
namespace {

std::vector<const proto::SparseKeySet*> KeysOf(absl::Span<const ParsedShare* const> shares) {
  std::vector<const proto::SparseKeySet*> out;
  out.reserve(shares.size());
  for (const ParsedShare* s : shares) out.push_back(&s->keys());
  return out;
}

}  // namespace

std::shared_ptr<const RoundCodec> RoundCodec::Preamble(
    crypto::SparseDpf dpf, std::shared_ptr<const crypto::proof::NormProofSystem> proof, int party) {
  auto codec = std::shared_ptr<RoundCodec>(new RoundCodec(party));
  codec->shape_ = dpf.Shape(party);
  codec->dpf_.emplace(std::move(dpf));
  codec->proof_ = std::move(proof);
  return codec;
}

absl::StatusOr<std::shared_ptr<const RoundCodec>> RoundCodec::Dense(const proto::RoundParameters& p,
                                                                    int party) {
  const int w = static_cast<int>(p.group_parameters().value_bits());
  auto codec = std::shared_ptr<RoundCodec>(new RoundCodec(party));
  TANDEM_ASSIGN_OR_RETURN(crypto::DenseSharing sharing,
                          crypto::DenseSharing::Create(p.dimension(), w));
  codec->sharing_.emplace(std::move(sharing));
  if (p.has_norm_bound()) {
    TANDEM_ASSIGN_OR_RETURN(
        crypto::proof::DenseNormProof proof,
        crypto::proof::DenseNormProof::Create(p.dimension(), w, p.norm_bound()));
    codec->dense_proof_.emplace(std::move(proof));
  }
  return std::shared_ptr<const RoundCodec>(std::move(codec));
}

uint64_t RoundCodec::dimension() const {
  return dense() ? sharing_->dimension() : dpf_->dimension();
}

int RoundCodec::value_bits() const { return dense() ? sharing_->value_bits() : dpf_->value_bits(); }

absl::Status RoundCodec::ValidateUpload(const proto::UploadRequest& request) const {
  if (dense()) {
    if (request.has_key_share() || !request.has_dense_share()) {
      return absl::InvalidArgumentError(
          "this round takes dense shares: set dense_share, not key_share");
    }
    TANDEM_RETURN_IF_ERROR(sharing_->Validate(request.dense_share(), party_));
  } else {
    if (request.has_dense_share()) {
      return absl::InvalidArgumentError(
          "this round takes PREAMBLE key shares: set key_share, not dense_share");
    }
    if (!request.has_key_share()) return absl::InvalidArgumentError("key_share is missing");
    TANDEM_RETURN_IF_ERROR(crypto::ValidateSparseKeySet(request.key_share(), shape_));
  }
  if (has_proof()) {
    if (!request.has_norm_proof()) {
      return absl::InvalidArgumentError("this round requires a norm_proof with the share");
    }
    return dense() ? dense_proof_->ValidateShare(request.norm_proof(), party_)
                   : proof_->ValidateShare(request.norm_proof(), party_);
  }
  if (request.has_norm_proof()) {
    return absl::InvalidArgumentError("this round has no norm bound; norm_proof must be unset");
  }
  return absl::OkStatus();
}

std::string RoundCodec::EncodeStored(const proto::UploadRequest& request,
                                     absl::string_view ticket_digest) const {
  const proto::NormProofShare* proof = has_proof() ? &request.norm_proof() : nullptr;
  return dense() ? EncodeStoredDenseShare(request.dense_share(), proof, ticket_digest)
                 : EncodeStoredShare(request.key_share(), proof, ticket_digest);
}

absl::StatusOr<std::string> RoundCodec::StoredDigest(
    const proto::UploadRequest& request, absl::string_view ticket_digest, absl::string_view stored,
    std::optional<crypto::ProofDigest>* public_digest) const {
  if (dense()) return crypto::Sha256Digest(stored);
  TANDEM_ASSIGN_OR_RETURN(*public_digest, crypto::PublicPartsDigest(request.key_share()));
  std::string digest = crypto::UploadContentDigest(request.key_share(),
                                                   has_proof() ? &request.norm_proof() : nullptr,
                                                   ticket_digest, &**public_digest);
  if (digest.empty()) return absl::InternalError("cannot hash the upload");
  return digest;
}

void RoundCodec::CopyInto(const proto::UploadRequest& request, ParsedShare* parsed) const {
  if (dense()) {
    *parsed->mutable_dense() = request.dense_share();
  } else {
    *parsed->mutable_keys() = request.key_share();
  }
  if (has_proof()) *parsed->mutable_proof() = request.norm_proof();
}

absl::StatusOr<ParsedShare> RoundCodec::ParseStored(absl::string_view blob, bool ticketed) const {
  if (!dense()) return ParseStoredShare(blob, shape_, proof_.get(), party_, ticketed);
  // The leader's values plus the largest proof share (8 bytes + tag per
  // element) plus the seeds and digest.
  uint64_t limit = sharing_->leader_value_bytes() + 1024;
  if (dense_proof_) {
    limit += 10 * (dense_proof_->circuit().witness_length() +
                   dense_proof_->circuit().flp().proof_length());
  }
  proto::StoredReportShare stored;
  if (blob.size() > limit || !stored.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return absl::InvalidArgumentError("stored dense share does not parse");
  }
  if (stored.has_key_share() || !stored.has_dense_share()) {
    return absl::InvalidArgumentError("stored share is not dense in a dense round");
  }
  TANDEM_RETURN_IF_ERROR(sharing_->Validate(stored.dense_share(), party_));
  if (dense_proof_) {
    TANDEM_RETURN_IF_ERROR(dense_proof_->ValidateShare(stored.norm_proof(), party_));
  } else if (stored.has_norm_proof()) {
    return absl::InvalidArgumentError("stored share has a norm proof in a round without bound");
  }
  if (ticketed != (stored.ticket_digest().size() == 32)) {
    return absl::InvalidArgumentError("stored share's ticket digest does not match the server");
  }
  ParsedShare out;
  out.mutable_dense()->Swap(stored.mutable_dense_share());
  out.mutable_proof()->Swap(stored.mutable_norm_proof());
  out.ticket_digest = std::move(*stored.mutable_ticket_digest());
  return out;
}

absl::StatusOr<ReportChecks> RoundCodec::Evaluate(absl::Span<const ParsedShare* const> shares,
                                                  absl::Span<const std::string> report_ids,
                                                  absl::string_view query_seed,
                                                  absl::Span<uint64_t> accumulator) const {
  if (dense()) return EvaluateDense(shares, report_ids, query_seed, accumulator);
  return EvaluateReportChecks(*dpf_, proof_.get(), party_, shares, report_ids, query_seed,
                              accumulator);
}

absl::StatusOr<ReportChecks> RoundCodec::EvaluateDense(absl::Span<const ParsedShare* const> shares,
                                                       absl::Span<const std::string> report_ids,
                                                       absl::string_view query_seed,
                                                       absl::Span<uint64_t> accumulator) const {
  if (shares.size() != report_ids.size()) {
    return absl::InvalidArgumentError("one report id per share");
  }
  ReportChecks out;
  out.digests.assign(shares.size(), sharing_->round_digest());
  if (dense_proof_) out.verifiers.resize(shares.size());
  tbb::enumerable_thread_specific<std::vector<uint64_t>> derived_buffers;
  // One pass over each share: its values into `target` (when accumulating)
  // and, with a bound, into the derived shares its verifier share needs.
  auto evaluate = [&](size_t i, absl::Span<uint64_t> target,
                      crypto::SparseDpfScratch*) -> absl::Status {
    const proto::DenseShare& share = shares[i]->dense();
    if (!dense_proof_) {
      return target.empty() ? sharing_->Validate(share, party_)
                            : sharing_->Accumulate(share, target);
    }
    std::vector<uint64_t>& derived = derived_buffers.local();
    derived.resize(dense_proof_->circuit().derived_length());
    TANDEM_RETURN_IF_ERROR(
        dense_proof_->EvaluateAndDerive(party_, share, target, absl::MakeSpan(derived)));
    TANDEM_ASSIGN_OR_RETURN(
        out.verifiers[i],
        dense_proof_->Query(party_, report_ids[i], share, shares[i]->proof(), derived, query_seed));
    return absl::OkStatus();
  };
  if (!accumulator.empty()) {
    TANDEM_RETURN_IF_ERROR(
        ForEachIntoAccumulator(shares.size(), dimension(), value_bits(), accumulator, evaluate));
    return out;
  }
  std::vector<absl::Status> statuses(shares.size());
  tbb::parallel_for(size_t{0}, shares.size(),
                    [&](size_t i) { statuses[i] = evaluate(i, absl::Span<uint64_t>(), nullptr); });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return out;
}

size_t RoundCodec::VerifierElements() const {
  if (proof_ != nullptr) return proof_->circuit().flp().verifier_length();
  if (dense_proof_.has_value()) return dense_proof_->circuit().flp().verifier_length();
  return 0;
}

// kMaxVerifierBytesPerExchange is half of what a helper daemon receives
// (kPeerReceiveBytes, aggregator/service/daemon.cc, 32 MiB), so that the
// largest circuits (2^24 gadget calls: 16,399 elements, 131 KB a report at
// two query points) still fit, 127 reports an exchange.
size_t RoundCodec::ExchangeBatchSize(int max_reports, size_t max_bytes) const {
  const size_t limit = static_cast<size_t>(std::max(1, max_reports));
  const size_t per_report = 8 * VerifierElements();
  if (per_report == 0) return limit;
  return std::min(limit, std::max<size_t>(1, max_bytes / per_report));
}

bool RoundCodec::Decide(const proto::NormProofVerifierShare& a,
                        const proto::NormProofVerifierShare& b) const {
  if (dense_proof_) return dense_proof_->Decide(a, b);
  return proof_ == nullptr || proof_->Decide(a, b);
}

absl::Status RoundCodec::Accumulate(absl::Span<const ParsedShare* const> shares,
                                    absl::Span<uint64_t> accumulator, bool subtract) const {
  if (!dense()) {
    return subtract ? SubtractShares(*dpf_, KeysOf(shares), accumulator)
                    : AccumulateShares(*dpf_, KeysOf(shares), accumulator);
  }
  // Each worker's buffer gets the (negated, when subtracting) shares; the
  // buffers are then added into the accumulator.
  return ForEachIntoAccumulator(
      shares.size(), dimension(), value_bits(), accumulator,
      [&](size_t i, absl::Span<uint64_t> target, crypto::SparseDpfScratch*) {
        return sharing_->Accumulate(shares[i]->dense(), target, subtract);
      });
}

}  // namespace tandem::aggregator
