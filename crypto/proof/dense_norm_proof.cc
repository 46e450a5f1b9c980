#include "crypto/proof/dense_norm_proof.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/field_vector.h"

namespace tandem::crypto::proof {

ShareBinding DenseBinding(const proto::DenseShare& share) {
  return {share.party() == 0 ? absl::string_view(share.values()) : absl::string_view(share.seed()),
          absl::string_view()};
}

absl::StatusOr<DenseNormProof> DenseNormProof::Create(uint64_t dimension, int value_bits,
                                                      const proto::NormBoundParameters& bound) {
  if (dimension < 1 || dimension > (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dense round with norm proofs needs D in [1, 2^20], got ", dimension));
  }
  TANDEM_ASSIGN_OR_RETURN(DenseSharing sharing, DenseSharing::Create(dimension, value_bits));
  TANDEM_ASSIGN_OR_RETURN(
      NormCircuit circuit,
      NormCircuit::Create(1, static_cast<int>(dimension), value_bits,
                          {bound.max_l2_squared(), bound.max_l2_squared()}, bound.chunk_length()));
  if (circuit.SoundnessLog2() > -60.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "norm proof soundness 2^", circuit.SoundnessLog2(), " is above 2^-60; lower chunk_length"));
  }
  return DenseNormProof(std::move(circuit), std::move(sharing));
}

absl::Status DenseNormProof::ClientValues(const proto::DenseShare& leader,
                                          const proto::DenseShare& helper,
                                          std::vector<uint64_t>* derived, std::vector<uint64_t>* u0,
                                          std::vector<uint64_t>* u1) const {
  TANDEM_RETURN_IF_ERROR(sharing_.Validate(leader, 0));
  TANDEM_RETURN_IF_ERROR(sharing_.Validate(helper, 1));
  const size_t n = circuit().num_values();
  const int w = circuit().value_bits();
  const uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  derived->assign(2 * n, 0);
  std::vector<uint64_t>& share = ThreadClientValueBuffers().share;
  share.resize(2 * n);
  for (int party = 0; party < 2; ++party) {
    std::vector<uint64_t>& u = party == 0 ? *u0 : *u1;
    u.resize(n);
    TANDEM_RETURN_IF_ERROR(sharing_.Expand(party == 0 ? leader : helper, absl::MakeSpan(u)));
    TANDEM_RETURN_IF_ERROR(circuit().DeriveFromBlockSums(party, u, absl::MakeSpan(share)));
    for (size_t j = 0; j < 2 * n; ++j) (*derived)[j] = gl::Add((*derived)[j], share[j]);
    for (uint64_t& x : u) x = (party == 0 ? x : 0 - x) & mask;  // u_b = (-1)^b y_b
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> DenseNormProof::Prove(
    absl::string_view report_id, const proto::DenseShare& leader, const proto::DenseShare& helper,
    SecureRandom* rng) const {
  ClientValueBuffers& buf = ThreadClientValueBuffers();
  TANDEM_RETURN_IF_ERROR(ClientValues(leader, helper, &buf.derived, &buf.u0, &buf.u1));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> witness, circuit().Witness(buf.u0, buf.u1));
  return core_.Prove(report_id, buf.derived, witness, DenseBinding(leader), DenseBinding(helper),
                     rng);
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>>
DenseNormProof::ProveWithWitness(absl::string_view report_id, const proto::DenseShare& leader,
                                 const proto::DenseShare& helper,
                                 absl::Span<const uint64_t> witness, SecureRandom* rng) const {
  std::vector<uint64_t> derived, u0, u1;
  TANDEM_RETURN_IF_ERROR(ClientValues(leader, helper, &derived, &u0, &u1));
  return core_.Prove(report_id, derived, witness, DenseBinding(leader), DenseBinding(helper), rng);
}

absl::Status DenseNormProof::EvaluateAndDerive(int party, const proto::DenseShare& share,
                                               absl::Span<uint64_t> accumulator,
                                               absl::Span<uint64_t> derived) const {
  TANDEM_RETURN_IF_ERROR(sharing_.Validate(share, party));
  if (derived.size() != circuit().derived_length()) {
    return absl::InvalidArgumentError("EvaluateAndDerive: bad output size");
  }
  // The values go to derived's second half, then are split in place.
  const absl::Span<uint64_t> values = derived.subspan(circuit().num_values());
  if (accumulator.empty()) {
    TANDEM_RETURN_IF_ERROR(sharing_.Expand(share, values));
  } else {
    TANDEM_RETURN_IF_ERROR(sharing_.AccumulateAndExpand(share, accumulator, values));
  }
  return circuit().DeriveFromBlockSums(party, values, derived);
}

absl::StatusOr<proto::NormProofVerifierShare> DenseNormProof::Query(
    int party, absl::string_view report_id, const proto::DenseShare& share,
    const proto::NormProofShare& proof, absl::Span<const uint64_t> derived,
    absl::string_view query_seed) const {
  TANDEM_RETURN_IF_ERROR(sharing_.Validate(share, party));
  return core_.Query(party, report_id, proof, derived, DenseBinding(share), query_seed);
}

}  // namespace tandem::crypto::proof
