#include "crypto/proof/norm_proof.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto::proof {
namespace {

constexpr absl::string_view kPartDomain = "tandem.normproof.part.v3";
constexpr absl::string_view kJointDomain = "tandem.normproof.jr.v3";
constexpr absl::string_view kQueryDomain = "tandem.normproof.query.v3";
constexpr size_t kSeedBytes = 16;
constexpr size_t kPartBytes = 32;

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

// The party and leaf-tree seed of every key, in order: with the VDPF digest
// (which covers every public part of the keys) this determines the key share.
// REQUIRES: keys validated (16-byte seeds).
std::string KeySeeds(const proto::SparseKeySet& keys) {
  std::string out;
  out.reserve(static_cast<size_t>(keys.keys_size()) * 24);
  for (const proto::BlockDpfKey& k : keys.keys()) {
    const uint64_t party = k.party();
    out.append(reinterpret_cast<const char*>(&party), 8);  // LE target
    out.append(k.seed());
  }
  return out;
}

absl::string_view Bytes(const ProofDigest& d) {
  return absl::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

absl::StatusOr<NormProofSystem> NormProofSystem::Create(const proto::BlockDpfParameters& group,
                                                        uint32_t num_groups,
                                                        const proto::NormBoundParameters& bound) {
  if (num_groups < 1 || num_groups > 4096) {
    return absl::InvalidArgumentError("num_groups must be in [1, 4096]");
  }
  if (group.log_num_blocks() > 24 || group.block_size() < 1 || group.block_size() > (1u << 20)) {
    return absl::InvalidArgumentError("group parameters: log_num_blocks <= 24, block_size in [1, 2^20]");
  }
  const uint64_t dimension = uint64_t{num_groups} << group.log_num_blocks();
  TANDEM_ASSIGN_OR_RETURN(SparseDpf dpf,
                          SparseDpf::Create(dimension * group.block_size(),
                                            static_cast<int>(group.block_size()),
                                            static_cast<int>(num_groups),
                                            static_cast<int>(group.value_bits())));
  TANDEM_ASSIGN_OR_RETURN(
      NormCircuit circuit,
      NormCircuit::Create(static_cast<int>(num_groups), static_cast<int>(group.block_size()),
                          static_cast<int>(group.value_bits()),
                          {bound.max_block_l2_squared(), bound.max_l2_squared()},
                          bound.chunk_length()));
  if (circuit.SoundnessLog2() > -60.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "norm proof soundness 2^", circuit.SoundnessLog2(), " is above 2^-60; lower chunk_length"));
  }
  return NormProofSystem(std::move(circuit), std::move(dpf));
}

absl::Status NormProofSystem::ClientValues(const proto::SparseKeySet& leader_keys,
                                           const proto::SparseKeySet& helper_keys,
                                           std::vector<uint64_t>* derived,
                                           std::vector<uint64_t>* u0,
                                           std::vector<uint64_t>* u1,
                                           std::array<ProofDigest, 2>* digests) const {
  const size_t n = circuit_.num_values();
  const uint64_t mask =
      circuit_.value_bits() == 64 ? ~uint64_t{0} : (uint64_t{1} << circuit_.value_bits()) - 1;
  SparseDpfScratch scratch;
  derived->assign(2 * n, 0);
  std::vector<uint64_t> share(2 * n);
  for (int party = 0; party < 2; ++party) {
    std::vector<uint64_t>& u = party == 0 ? *u0 : *u1;
    u.resize(n);
    TANDEM_ASSIGN_OR_RETURN(
        const ProofDigest digest,
        dpf_.EvaluateBlockSums(party == 0 ? leader_keys : helper_keys, absl::MakeSpan(u), &scratch));
    if (digests != nullptr) (*digests)[party] = digest;
    TANDEM_RETURN_IF_ERROR(circuit_.DeriveFromBlockSums(party, u, absl::MakeSpan(share)));
    for (size_t j = 0; j < 2 * n; ++j) (*derived)[j] = gl::Add((*derived)[j], share[j]);
    // u_b = (-1)^b S_b mod 2^w (norm_circuit.h).
    for (uint64_t& x : u) x = (party == 0 ? x : 0 - x) & mask;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> NormProofSystem::Prove(
    absl::string_view report_id, const proto::SparseKeySet& leader_keys,
    const proto::SparseKeySet& helper_keys, SecureRandom* rng) const {
  std::vector<uint64_t> derived, u0, u1;
  std::array<ProofDigest, 2> digests;
  TANDEM_RETURN_IF_ERROR(ClientValues(leader_keys, helper_keys, &derived, &u0, &u1, &digests));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> witness, circuit_.Witness(u0, u1));
  return ProveWithDigests(report_id, leader_keys, helper_keys, derived, witness, digests, rng);
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>>
NormProofSystem::ProveWithWitness(absl::string_view report_id,
                                  const proto::SparseKeySet& leader_keys,
                                  const proto::SparseKeySet& helper_keys,
                                  absl::Span<const uint64_t> derived,
                                  absl::Span<const uint64_t> witness, SecureRandom* rng) const {
  SparseDpfScratch scratch;
  std::array<ProofDigest, 2> digests;
  TANDEM_ASSIGN_OR_RETURN(digests[0], dpf_.ComputeProofDigest(leader_keys, &scratch));
  TANDEM_ASSIGN_OR_RETURN(digests[1], dpf_.ComputeProofDigest(helper_keys, &scratch));
  return ProveWithDigests(report_id, leader_keys, helper_keys, derived, witness, digests, rng);
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>>
NormProofSystem::ProveWithDigests(absl::string_view report_id,
                                  const proto::SparseKeySet& leader_keys,
                                  const proto::SparseKeySet& helper_keys,
                                  absl::Span<const uint64_t> derived,
                                  absl::Span<const uint64_t> witness,
                                  const std::array<ProofDigest, 2>& digests,
                                  SecureRandom* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng is required");
  if (derived.size() != circuit_.derived_length() ||
      witness.size() != circuit_.witness_length()) {
    return absl::InvalidArgumentError("derived values or witness have the wrong length");
  }
  for (uint64_t v : witness) {
    if (v >= gl::kP) return absl::InvalidArgumentError("witness element >= p");
  }
  const ParallelSumMul3Flp& flp = circuit_.flp();
  TANDEM_ASSIGN_OR_RETURN(std::string helper_seed, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string blind0, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string blind1, RandomBytes(rng, kSeedBytes));
  TANDEM_ASSIGN_OR_RETURN(std::string wire_seed, RandomBytes(rng, kSeedBytes));
  std::vector<uint64_t> helper_witness, helper_proof;
  TANDEM_RETURN_IF_ERROR(ExpandHelperShares(helper_seed, &helper_witness, &helper_proof));
  std::vector<uint64_t> leader_witness(witness.size());
  for (size_t i = 0; i < witness.size(); ++i) {
    leader_witness[i] = gl::Sub(witness[i], helper_witness[i]);
  }
  TANDEM_ASSIGN_OR_RETURN(std::string part0, JointRandPart(blind0, report_id, leader_keys,
                                                           digests[0], Bytes(leader_witness)));
  TANDEM_ASSIGN_OR_RETURN(std::string part1,
                          JointRandPart(blind1, report_id, helper_keys, digests[1], helper_seed));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> jr, HashParts({kJointDomain, part0, part1}));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> weights, Weights(Bytes(jr)));
  std::vector<uint64_t> inputs(flp.input_length());
  TANDEM_RETURN_IF_ERROR(circuit_.GadgetInputs(0, derived, witness, weights,
                                               absl::MakeSpan(inputs)));
  std::vector<uint64_t> seeds(flp.seed_length()), proof(flp.proof_length());
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(wire_seed), "wire-seeds", absl::MakeSpan(seeds)));
  TANDEM_RETURN_IF_ERROR(flp.Prove(inputs, seeds, absl::MakeSpan(proof)));

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

absl::Status NormProofSystem::ValidateShare(const proto::NormProofShare& share, int party) const {
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
        "leader norm_proof (protocol v3) needs ", circuit_.witness_length(), " witness and ",
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

absl::Status NormProofSystem::DeriveInputShare(int party, absl::Span<const uint64_t> expansion,
                                               absl::Span<uint64_t> derived) const {
  const size_t n = circuit_.num_values();
  const size_t b = static_cast<size_t>(circuit_.block_size());
  const size_t group_dim = dpf_.group_dimension();
  if (expansion.size() != group_dim * circuit_.num_blocks() || derived.size() != 2 * n) {
    return absl::InvalidArgumentError("DeriveInputShare: expansion or output size mismatch");
  }
  for (int g = 0; g < circuit_.num_blocks(); ++g) {
    TANDEM_RETURN_IF_ERROR(circuit_.DeriveGroupShare(
        party, expansion.subspan(g * group_dim, group_dim), derived.subspan(g * b, b),
        derived.subspan(n + g * b, b)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ProofDigest> NormProofSystem::EvaluateAndDerive(const SparseDpf& dpf, int party,
                                                               const proto::SparseKeySet& keys,
                                                               absl::Span<uint64_t> derived,
                                                               SparseDpfScratch* scratch) const {
  return EvaluateAccumulateAndDerive(dpf, party, keys, absl::Span<uint64_t>(), derived, scratch);
}

absl::StatusOr<ProofDigest> NormProofSystem::EvaluateAccumulateAndDerive(
    const SparseDpf& dpf, int party, const proto::SparseKeySet& keys,
    absl::Span<uint64_t> accumulator, absl::Span<uint64_t> derived,
    SparseDpfScratch* scratch) const {
  if (dpf.num_groups() != circuit_.num_blocks() || dpf.block_size() != circuit_.block_size() ||
      dpf.value_bits() != circuit_.value_bits() || dpf.blocks_per_group() != dpf_.blocks_per_group()) {
    return absl::InvalidArgumentError("EvaluateAndDerive: DPF parameters differ from the proof's");
  }
  if (derived.size() != circuit_.derived_length() || (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("EvaluateAndDerive: bad output size or party");
  }
  // The block sums go to derived's second half, then are split in place.
  const absl::Span<uint64_t> sums = derived.subspan(circuit_.num_values());
  TANDEM_ASSIGN_OR_RETURN(ProofDigest digest,
                          accumulator.empty()
                              ? dpf.EvaluateBlockSums(keys, sums, scratch)
                              : dpf.EvaluateAccumulateAndSum(keys, accumulator, sums, scratch));
  TANDEM_RETURN_IF_ERROR(circuit_.DeriveFromBlockSums(party, sums, derived));
  return digest;
}

absl::StatusOr<proto::NormProofVerifierShare> NormProofSystem::Query(
    int party, absl::string_view report_id, const proto::SparseKeySet& keys,
    const proto::NormProofShare& share, absl::Span<const uint64_t> derived,
    const ProofDigest& digest, absl::string_view query_seed) const {
  TANDEM_RETURN_IF_ERROR(ValidateShare(share, party));
  const ParallelSumMul3Flp& flp = circuit_.flp();
  // The leader's shares are read in place; the helper's are expanded.
  std::vector<uint64_t> helper_witness, helper_proof;
  absl::Span<const uint64_t> witness, proof;
  std::string own_part;
  if (party == 0) {
    witness = absl::MakeConstSpan(share.witness().data(), share.witness_size());
    proof = absl::MakeConstSpan(share.proof().data(), share.proof_size());
    TANDEM_ASSIGN_OR_RETURN(own_part, JointRandPart(share.blind(), report_id, keys, digest,
                                                    Bytes(witness)));
  } else {
    TANDEM_RETURN_IF_ERROR(ExpandHelperShares(share.seed(), &helper_witness, &helper_proof));
    witness = helper_witness;
    proof = helper_proof;
    TANDEM_ASSIGN_OR_RETURN(own_part,
                            JointRandPart(share.blind(), report_id, keys, digest, share.seed()));
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<uint8_t> jr,
      party == 0 ? HashParts({kJointDomain, own_part, share.peer_joint_rand_part()})
                 : HashParts({kJointDomain, share.peer_joint_rand_part(), own_part}));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> weights, Weights(Bytes(jr)));
  // Every element is written by GadgetInputs: skip the zero fill of 8 * 3M
  // bytes.
  const auto inputs = std::make_unique_for_overwrite<uint64_t[]>(flp.input_length());
  const absl::Span<uint64_t> in(inputs.get(), flp.input_length());
  TANDEM_RETURN_IF_ERROR(circuit_.GadgetInputs(party, derived, witness, weights, in));
  TANDEM_ASSIGN_OR_RETURN(uint64_t affine, circuit_.AffineShare(party, witness, weights));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> points, QueryPoints(query_seed, report_id));
  std::vector<uint64_t> values(flp.verifier_length());
  TANDEM_RETURN_IF_ERROR(flp.Query(in, proof, affine, points, absl::MakeSpan(values)));
  proto::NormProofVerifierShare out;
  out.set_joint_rand_seed(std::string(Bytes(jr)));
  out.mutable_values()->Assign(values.begin(), values.end());
  return out;
}

bool NormProofSystem::Decide(const proto::NormProofVerifierShare& a,
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
  absl::StatusOr<bool> ok = circuit_.flp().Decide(sum);
  return ok.ok() && *ok;
}

absl::StatusOr<std::vector<uint64_t>> NormProofSystem::QueryPoints(
    absl::string_view query_seed, absl::string_view report_id) const {
  if (query_seed.size() != kQuerySeedBytes) {
    return absl::InvalidArgumentError("proof query seed must be 32 bytes");
  }
  const ParallelSumMul3Flp& flp = circuit_.flp();
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

absl::StatusOr<std::string> NormProofSystem::JointRandPart(absl::string_view blind,
                                                           absl::string_view report_id,
                                                           const proto::SparseKeySet& keys,
                                                           const ProofDigest& digest,
                                                           absl::string_view binding) const {
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> h,
                          HashParts({kPartDomain, blind, report_id, KeySeeds(keys), Bytes(digest),
                                     binding}));
  return std::string(Bytes(h));
}

absl::StatusOr<std::vector<uint64_t>> NormProofSystem::Weights(
    absl::string_view joint_rand_seed) const {
  std::vector<uint64_t> w(circuit_.weights_length());
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(joint_rand_seed), "weights", absl::MakeSpan(w)));
  return w;
}

absl::Status NormProofSystem::ExpandHelperShares(absl::string_view seed,
                                                 std::vector<uint64_t>* witness,
                                                 std::vector<uint64_t>* proof) const {
  witness->resize(circuit_.witness_length());
  proof->resize(circuit_.flp().proof_length());
  TANDEM_RETURN_IF_ERROR(ExpandField(Span(seed), "helper-witness", absl::MakeSpan(*witness)));
  return ExpandField(Span(seed), "helper-proof", absl::MakeSpan(*proof));
}

uint64_t L2SquaredBoundForClip(double clip_l2_norm, int frac_bits, uint64_t num_values) {
  const double r = clip_l2_norm * std::ldexp(1.0, frac_bits) +
                   0.5 * std::sqrt(static_cast<double>(num_values));
  return static_cast<uint64_t>(std::ceil(r * r));
}

}  // namespace tandem::crypto::proof
