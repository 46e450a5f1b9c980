#include "aggregator/core/norm_verification.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/core/deterministic.h"
#include "aggregator/core/expansion.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"

namespace tandem::aggregator {

ParsedShare::ParsedShare()
    : heap_keys_(std::make_unique<proto::SparseKeySet>()),
      heap_proof_(std::make_unique<proto::NormProofShare>()),
      heap_dense_(std::make_unique<proto::DenseShare>()),
      keys_(heap_keys_.get()),
      proof_(heap_proof_.get()),
      dense_(heap_dense_.get()) {}

namespace {
google::protobuf::ArenaOptions ArenaFor(size_t bytes) {
  google::protobuf::ArenaOptions o;
  // Room for the arena's own header and the messages' fixed parts besides
  // the copied fields.
  o.start_block_size = bytes + 4096;
  o.max_block_size = std::max<size_t>(o.start_block_size, o.max_block_size);
  return o;
}
}  // namespace

const crypto::ProofDigest* PublicDigestOf(const ParsedShare& share) {
  return share.public_digest.has_value() ? &*share.public_digest : nullptr;
}

ParsedShare::ParsedShare(size_t arena_bytes)
    : arena_(std::make_unique<google::protobuf::Arena>(ArenaFor(arena_bytes))),
      keys_(google::protobuf::Arena::CreateMessage<proto::SparseKeySet>(arena_.get())),
      proof_(google::protobuf::Arena::CreateMessage<proto::NormProofShare>(arena_.get())),
      dense_(google::protobuf::Arena::CreateMessage<proto::DenseShare>(arena_.get())) {}

ParsedShare::ParsedShare(std::shared_ptr<google::protobuf::Arena> arena,
                         proto::UploadRequest* request)
    : arena_(std::move(arena)),
      keys_(request->mutable_key_share()),
      proof_(request->mutable_norm_proof()),
      dense_(request->mutable_dense_share()) {}

ParsedShare::~ParsedShare() = default;

std::string EncodeStoredShare(const proto::SparseKeySet& keys, const proto::NormProofShare* proof,
                              absl::string_view ticket_digest) {
  return crypto::StoredReportShareBytes(&keys, proof, ticket_digest, nullptr);
}

std::string EncodeStoredDenseShare(const proto::DenseShare& share,
                                   const proto::NormProofShare* proof,
                                   absl::string_view ticket_digest) {
  return crypto::StoredReportShareBytes(nullptr, proof, ticket_digest, &share);
}

absl::StatusOr<ParsedShare> ParseStoredShare(absl::string_view blob,
                                             const crypto::ExpectedKeySetShape& shape,
                                             const crypto::proof::NormProofSystem* proof,
                                             int party, bool ticketed) {
  ParsedShare out;
  // Key set bound plus the largest proof share (8 bytes + tag per element)
  // plus the ticket digest.
  uint64_t limit = crypto::MaxSerializedKeySetSize(shape) + 1024;
  if (proof != nullptr) {
    limit += 10 * (proof->circuit().witness_length() + proof->circuit().flp().proof_length());
  }
  proto::StoredReportShare stored;
  absl::Status parsed = absl::OkStatus();
  if (blob.size() > limit || !stored.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    parsed = absl::InvalidArgumentError("stored share does not parse");
  } else if (stored.has_dense_share()) {
    parsed = absl::InvalidArgumentError("stored share is dense in a PREAMBLE round");
  } else {
    parsed = crypto::ValidateSparseKeySet(stored.key_share(), shape);
  }
  if (!parsed.ok() && proof == nullptr && !ticketed) {
    // A bare key set, as stores written before 2026-12-07 hold them for
    // rounds without bound or ticket (it never validates as the above).
    absl::StatusOr<proto::SparseKeySet> bare = crypto::ParseSparseKeySet(blob, shape);
    if (!bare.ok()) return parsed;
    *out.mutable_keys() = *std::move(bare);
    return out;
  }
  TANDEM_RETURN_IF_ERROR(parsed);
  if (proof != nullptr) {
    TANDEM_RETURN_IF_ERROR(proof->ValidateShare(stored.norm_proof(), party));
  } else if (stored.has_norm_proof()) {
    return absl::InvalidArgumentError("stored share has a norm proof in a round without bound");
  }
  if (ticketed != (stored.ticket_digest().size() == 32)) {
    return absl::InvalidArgumentError("stored share's ticket digest does not match the server");
  }
  out.mutable_keys()->Swap(stored.mutable_key_share());
  out.mutable_proof()->Swap(stored.mutable_norm_proof());
  out.ticket_digest = std::move(*stored.mutable_ticket_digest());
  return out;
}

absl::StatusOr<std::vector<NormEvaluation>> EvaluateNormChecks(
    const crypto::SparseDpf& dpf, const crypto::proof::NormProofSystem& proof, int party,
    absl::Span<const ParsedShare* const> shares, absl::Span<const std::string> report_ids,
    absl::string_view query_seed, absl::Span<uint64_t> accumulator) {
  if (shares.size() != report_ids.size()) {
    return absl::InvalidArgumentError("one report id per share");
  }
  std::vector<NormEvaluation> out(shares.size());
  tbb::enumerable_thread_specific<std::vector<uint64_t>> derived_buffers;
  // One evaluation of report i, each group's leaves summed in the AES kernel
  // (and added into `target` when accumulating), then its verifier share.
  auto evaluate = [&](size_t i, absl::Span<uint64_t> target,
                      crypto::SparseDpfScratch* scratch) -> absl::Status {
    std::vector<uint64_t>& derived = derived_buffers.local();
    derived.resize(proof.circuit().derived_length());
    TANDEM_ASSIGN_OR_RETURN(out[i].digest,
                            proof.EvaluateAccumulateAndDerive(dpf, party, shares[i]->keys(), target,
                                                              absl::MakeSpan(derived), scratch,
                                                              PublicDigestOf(*shares[i])));
    TANDEM_ASSIGN_OR_RETURN(out[i].verifier,
                            proof.Query(party, report_ids[i], shares[i]->keys(), shares[i]->proof(),
                                        derived, out[i].digest, query_seed));
    return absl::OkStatus();
  };
  if (!accumulator.empty()) {
    TANDEM_RETURN_IF_ERROR(ForEachIntoAccumulator(shares.size(), dpf.dimension(),
                                                  dpf.value_bits(), accumulator, evaluate));
    return out;
  }
  std::vector<absl::Status> statuses(shares.size());
  tbb::enumerable_thread_specific<crypto::SparseDpfScratch> scratch;
  tbb::parallel_for(size_t{0}, shares.size(), [&](size_t i) {
    statuses[i] = evaluate(i, absl::Span<uint64_t>(), &scratch.local());
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return out;
}

absl::StatusOr<ReportChecks> EvaluateReportChecks(
    const crypto::SparseDpf& dpf, const crypto::proof::NormProofSystem* proof, int party,
    absl::Span<const ParsedShare* const> shares, absl::Span<const std::string> report_ids,
    absl::string_view query_seed, absl::Span<uint64_t> accumulator) {
  ReportChecks out;
  if (shares.empty()) return out;
  if (proof != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<NormEvaluation> evals,
                            EvaluateNormChecks(dpf, *proof, party, shares, report_ids,
                                               query_seed, accumulator));
    for (NormEvaluation& e : evals) {
      out.digests.push_back(e.digest);
      out.verifiers.push_back(std::move(e.verifier));
    }
    return out;
  }
  std::vector<const proto::SparseKeySet*> keys;
  std::vector<const crypto::ProofDigest*> public_digests;
  keys.reserve(shares.size());
  public_digests.reserve(shares.size());
  for (const ParsedShare* s : shares) {
    keys.push_back(&s->keys());
    public_digests.push_back(PublicDigestOf(*s));
  }
  TANDEM_ASSIGN_OR_RETURN(out.digests, ComputeDigests(dpf, keys, accumulator, public_digests));
  return out;
}

}  // namespace tandem::aggregator
