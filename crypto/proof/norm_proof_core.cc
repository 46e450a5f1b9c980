#include "crypto/proof/norm_proof_core.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/field_vector.h"

namespace tandem::crypto::proof {
namespace {

constexpr absl::string_view kJointDomain = "tandem.normproof.jr.v5";
constexpr absl::string_view kQueryDomain = "tandem.normproof.query.v5";
constexpr size_t kSeedBytes = 16;
constexpr size_t kPartBytes = 32;
// The XOF labels of the weights: the row weights (on F_p^*), then the slot,
// block and tau weights in one stream, whose first range_slots elements
// are the slot weights (Decide expands those alone).
constexpr absl::string_view kRowWeightsLabel = "row-weights";
constexpr absl::string_view kWeightsLabel = "weights";

absl::string_view Bytes(absl::Span<const uint64_t> v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 8);  // LE target
}
absl::string_view Bytes(const std::vector<uint8_t>& v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()), v.size());
}
absl::Span<const uint8_t> Span(absl::string_view s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

absl::StatusOr<std::string> RandomBytes(SecureRandom* rng, size_t n) {
  std::string out(n, '\0');
  TANDEM_RETURN_IF_ERROR(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), n)));
  return out;
}

// The prover's buffers, reused by the calling thread from proof to proof.
// At 16,384 sent values the gadget inputs alone are 1.2 MB: allocated per
// proof, their zero fill and first-touch page faults (the allocator hands
// the heap top back to the kernel between proofs) took about half of
// BM_Prove (perf, 2026-12-06). Every element is written before it is read
// (ExpandField, GadgetInputs, the loops of Prove), so nothing of an earlier
// proof reaches a later one. Thread-safe: one set per thread.
struct ProverBuffers {
  std::vector<uint64_t> helper_witness, helper_proof, leader_witness, weights, inputs, seeds, proof;
};
ProverBuffers& ThreadProverBuffers() {
  thread_local ProverBuffers buffers;
  return buffers;
}

}  // namespace

ClientValueBuffers& ThreadClientValueBuffers() {
  thread_local ClientValueBuffers buffers;
  return buffers;
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> NormProofCore::Prove(
    absl::string_view report_id, absl::Span<const uint64_t> derived,
    absl::Span<const uint64_t> witness, const ShareBinding& leader_binding,
    const ShareBinding& helper_binding, SecureRandom* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng is required");
  if (derived.size() != circuit_.derived_length() || witness.size() != circuit_.witness_length()) {
    return absl::InvalidArgumentError("derived values or witness have the wrong length");
  }
  for (uint64_t v : witness) {
    if (v >= gl::kP) return absl::InvalidArgumentError("witness element >= p");
  }
  const RangeSquareFlp& flp = circuit_.flp();
  TANDEM_ASSIGN_OR_RETURN(std::string helper_seed, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string blind0, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string blind1, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string wire_seed, RandomBytes(rng, kSeedBytes));
  ProverBuffers& buf = ThreadProverBuffers();
  std::vector<uint64_t>& helper_witness = buf.helper_witness;
  std::vector<uint64_t>& helper_proof = buf.helper_proof;
  TANDEM_RETURN_IF_ERROR(ExpandHelperShares(helper_seed, &helper_witness, &helper_proof));
  std::vector<uint64_t>& leader_witness = buf.leader_witness;
  leader_witness.resize(witness.size());
  for (size_t i = 0; i < witness.size(); ++i) {
    leader_witness[i] = gl::Sub(witness[i], helper_witness[i]);
  }
  TANDEM_ASSIGN_OR_RETURN(std::string part0,
                          JointRandPart(blind0, report_id, leader_binding, Bytes(leader_witness)));
  TANDEM_ASSIGN_OR_RETURN(std::string part1,
                          JointRandPart(blind1, report_id, helper_binding, helper_seed));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> jr, HashParts({kJointDomain, part0, part1}));
  TANDEM_RETURN_IF_ERROR(WeightsInto(Bytes(jr), &buf.weights));
  std::vector<uint64_t>& inputs = buf.inputs;
  inputs.resize(flp.input_length());
  TANDEM_RETURN_IF_ERROR(
      circuit_.GadgetInputs(0, derived, witness, buf.weights, absl::MakeSpan(inputs)));
  std::vector<uint64_t>& seeds = buf.seeds;
  std::vector<uint64_t>& proof = buf.proof;
  seeds.resize(flp.seed_length());
  proof.resize(flp.proof_length());
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(wire_seed), "wire-seeds", absl::MakeSpan(seeds)));
  TANDEM_RETURN_IF_ERROR(
      flp.Prove(inputs, circuit_.SlotWeights(buf.weights), seeds, absl::MakeSpan(proof)));

  std::pair<proto::NormProofShare, proto::NormProofShare> out;
  proto::NormProofShare& leader = out.first;
  proto::NormProofShare& helper = out.second;
  leader.mutable_witness()->Assign(leader_witness.begin(), leader_witness.end());
  leader.mutable_proof()->Reserve(static_cast<int>(proof.size()));
  for (size_t i = 0; i < proof.size(); ++i) {
    leader.add_proof(gl::Sub(proof[i], helper_proof[i]));
  }
  leader.set_blind(blind0);
  leader.set_peer_joint_rand_part(part1);
  helper.set_seed(helper_seed);
  helper.set_blind(blind1);
  helper.set_peer_joint_rand_part(part0);
  return out;
}

absl::Status NormProofCore::ValidateShare(const proto::NormProofShare& share, int party) const {
  if (!share.GetReflection()->GetUnknownFields(share).empty()) {
    return absl::InvalidArgumentError("norm_proof has unknown fields");
  }
  if (share.blind().size() != kSeedBytes || share.peer_joint_rand_part().size() != kPartBytes) {
    return absl::InvalidArgumentError("norm_proof needs a 16-byte blind and a 32-byte peer part");
  }
  if (party == 1) {
    if (share.seed().size() != kSeedBytes || share.witness_size() != 0 || share.proof_size() != 0) {
      return absl::InvalidArgumentError("helper norm_proof carries exactly a 16-byte seed");
    }
    return absl::OkStatus();
  }
  if (party != 0) return absl::InvalidArgumentError("party must be 0 or 1");
  if (!share.seed().empty() ||
      static_cast<size_t>(share.witness_size()) != circuit_.witness_length() ||
      static_cast<size_t>(share.proof_size()) != circuit_.flp().proof_length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader norm_proof (protocol v5) needs ", circuit_.witness_length(), " witness and ",
        circuit_.flp().proof_length(), " proof elements and no seed, got ", share.witness_size(),
        " and ", share.proof_size(), " (a proof of another protocol version?)"));
  }
  for (uint64_t v : share.witness()) {
    if (v >= gl::kP) {
      return absl::InvalidArgumentError("norm_proof witness element >= p = 2^64 - 2^32 + 1");
    }
  }
  for (uint64_t v : share.proof()) {
    if (v >= gl::kP) {
      return absl::InvalidArgumentError("norm_proof proof element >= p = 2^64 - 2^32 + 1");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::NormProofVerifierShare> NormProofCore::Query(
    int party, absl::string_view report_id, const proto::NormProofShare& share,
    absl::Span<const uint64_t> derived, const ShareBinding& own_binding,
    absl::string_view query_seed) const {
  TANDEM_RETURN_IF_ERROR(ValidateShare(share, party));
  const RangeSquareFlp& flp = circuit_.flp();
  // The leader's shares are read in place; the helper's are expanded.
  std::vector<uint64_t> helper_witness, helper_proof;
  absl::Span<const uint64_t> witness, proof;
  std::string own_part;
  if (party == 0) {
    witness = absl::MakeConstSpan(share.witness().data(), share.witness_size());
    proof = absl::MakeConstSpan(share.proof().data(), share.proof_size());
    TANDEM_ASSIGN_OR_RETURN(own_part,
                            JointRandPart(share.blind(), report_id, own_binding, Bytes(witness)));
  } else {
    TANDEM_RETURN_IF_ERROR(ExpandHelperShares(share.seed(), &helper_witness, &helper_proof));
    witness = helper_witness;
    proof = helper_proof;
    TANDEM_ASSIGN_OR_RETURN(own_part,
                            JointRandPart(share.blind(), report_id, own_binding, share.seed()));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> jr,
                          party == 0
                              ? HashParts({kJointDomain, own_part, share.peer_joint_rand_part()})
                              : HashParts({kJointDomain, share.peer_joint_rand_part(), own_part}));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> weights, Weights(Bytes(jr)));
  // GadgetInputs writes every element.
  const auto inputs = std::make_unique_for_overwrite<uint64_t[]>(flp.input_length());
  const absl::Span<uint64_t> in(inputs.get(), flp.input_length());
  TANDEM_RETURN_IF_ERROR(circuit_.GadgetInputs(party, derived, witness, weights, in));
  TANDEM_ASSIGN_OR_RETURN(uint64_t affine, circuit_.AffineShare(party, witness, weights));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> points, QueryPoints(query_seed, report_id));
  std::vector<uint64_t> values(flp.verifier_length());
  TANDEM_RETURN_IF_ERROR(
      flp.Query(in, proof, affine, circuit_.RowWeights(weights), points, absl::MakeSpan(values)));
  proto::NormProofVerifierShare out;
  out.set_joint_rand_seed(std::string(Bytes(jr)));
  out.mutable_values()->Assign(values.begin(), values.end());
  return out;
}

bool NormProofCore::Decide(const proto::NormProofVerifierShare& a,
                           const proto::NormProofVerifierShare& b) const {
  const size_t len = circuit_.flp().verifier_length();
  if (a.joint_rand_seed().size() != kPartBytes || a.joint_rand_seed() != b.joint_rand_seed() ||
      static_cast<size_t>(a.values_size()) != len || static_cast<size_t>(b.values_size()) != len) {
    return false;
  }
  std::vector<uint64_t> sum(len);
  for (size_t i = 0; i < len; ++i) {
    if (a.values(i) >= gl::kP || b.values(i) >= gl::kP) return false;
    sum[i] = gl::Add(a.values(i), b.values(i));
  }
  // The slot weights of the gadget, from the seed both servers derived:
  // the first range_slots elements of the kWeightsLabel stream, expanded
  // alone (ExpandField's output for a length is a prefix of its output for
  // any longer one); the row weights are Query's only.
  std::vector<uint64_t> slot_weights(circuit_.flp().range_slots());
  if (!ExpandField(Span(a.joint_rand_seed()), kWeightsLabel, absl::MakeSpan(slot_weights)).ok()) {
    return false;
  }
  absl::StatusOr<bool> ok = circuit_.flp().Decide(sum, slot_weights);
  return ok.ok() && *ok;
}

absl::StatusOr<std::vector<uint64_t>> NormProofCore::QueryPoints(
    absl::string_view query_seed, absl::string_view report_id) const {
  if (query_seed.size() != kQuerySeedBytes) {
    return absl::InvalidArgumentError("proof query seed must be 32 bytes");
  }
  const RangeSquareFlp& flp = circuit_.flp();
  std::vector<uint64_t> points;
  for (uint64_t counter = 0; points.size() < static_cast<size_t>(flp.num_queries()); ++counter) {
    if (counter == 64) return absl::InternalError("could not derive query points");
    std::string ctr(8, '\0');
    std::memcpy(ctr.data(), &counter, 8);
    TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> h,
                            HashParts({kQueryDomain, query_seed, report_id, ctr}));
    // Rejection sampling of a uniform element (first 8 bytes, little
    // endian), then of the proof domain (3N points).
    uint64_t r;
    std::memcpy(&r, h.data(), 8);  // LE target
    if (r >= gl::kP || flp.InProofDomain(r)) continue;
    if (std::find(points.begin(), points.end(), r) != points.end()) continue;
    points.push_back(r);
  }
  return points;
}

absl::StatusOr<std::string> NormProofCore::JointRandPart(absl::string_view blind,
                                                         absl::string_view report_id,
                                                         const ShareBinding& share,
                                                         absl::string_view binding) const {
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> h,
                          HashParts({part_domain_, blind, report_id, share[0], share[1], binding}));
  return std::string(Bytes(h));
}

absl::StatusOr<std::vector<uint64_t>> NormProofCore::Weights(
    absl::string_view joint_rand_seed) const {
  std::vector<uint64_t> w;
  TANDEM_RETURN_IF_ERROR(WeightsInto(joint_rand_seed, &w));
  return w;
}

absl::Status NormProofCore::WeightsInto(absl::string_view joint_rand_seed,
                                        std::vector<uint64_t>* weights) const {
  weights->resize(circuit_.weights_length());
  // Row weights on F_p^* (the circuit divides by them), the rest on F_p.
  const size_t rows = circuit_.flp().num_rows();
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(joint_rand_seed), kRowWeightsLabel,
                                     absl::MakeSpan(*weights).subspan(0, rows),
                                     /*nonzero=*/true));
  return ExpandField(Span(joint_rand_seed), kWeightsLabel, absl::MakeSpan(*weights).subspan(rows));
}

absl::Status NormProofCore::ExpandHelperShares(absl::string_view seed,
                                               std::vector<uint64_t>* witness,
                                               std::vector<uint64_t>* proof) const {
  witness->resize(circuit_.witness_length());
  proof->resize(circuit_.flp().proof_length());
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(seed), "helper-witness", absl::MakeSpan(*witness)));
  return ExpandField(Span(seed), "helper-proof", absl::MakeSpan(*proof));
}

}  // namespace tandem::crypto::proof
