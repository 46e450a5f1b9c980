#include "crypto/proof/norm_proof.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto::proof {
namespace {

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
                                           std::vector<uint64_t>* u0, std::vector<uint64_t>* u1,
                                           std::array<ProofDigest, 2>* digests,
                                           ProofDigest* public_parts_out) const {
  const size_t n = circuit().num_values();
  const uint64_t mask =
      circuit().value_bits() == 64 ? ~uint64_t{0} : (uint64_t{1} << circuit().value_bits()) - 1;
  // This thread's DPF scratch, kept from proof to proof like the buffers.
  thread_local SparseDpfScratch scratch;
  derived->assign(2 * n, 0);
  // Both key sets of a report carry the same public parts: one P for both
  // digests (public_digest.h). Key sets whose public parts differ (a test's
  // tampering) get each its own P, as a server would compute.
  ProofDigest public_parts[2];
  if (digests != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(public_parts[0], PublicPartsDigest(leader_keys));
    public_parts[1] = public_parts[0];
    if (!SamePublicParts(leader_keys, helper_keys)) {
      TANDEM_ASSIGN_OR_RETURN(public_parts[1], PublicPartsDigest(helper_keys));
    }
    if (public_parts_out != nullptr) *public_parts_out = public_parts[0];
  }
  std::vector<uint64_t>& share = ThreadClientValueBuffers().share;
  share.resize(2 * n);
  for (int party = 0; party < 2; ++party) {
    std::vector<uint64_t>& u = party == 0 ? *u0 : *u1;
    u.resize(n);
    TANDEM_ASSIGN_OR_RETURN(
        const ProofDigest digest,
        dpf_.EvaluateBlockSums(party == 0 ? leader_keys : helper_keys, absl::MakeSpan(u), &scratch,
                               digests != nullptr ? &public_parts[party] : nullptr));
    if (digests != nullptr) (*digests)[party] = digest;
    TANDEM_RETURN_IF_ERROR(circuit().DeriveFromBlockSums(party, u, absl::MakeSpan(share)));
    for (size_t j = 0; j < 2 * n; ++j) (*derived)[j] = gl::Add((*derived)[j], share[j]);
    // u_b = (-1)^b S_b mod 2^w (norm_circuit.h).
    for (uint64_t& x : u) x = (party == 0 ? x : 0 - x) & mask;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> NormProofSystem::Prove(
    absl::string_view report_id, const proto::SparseKeySet& leader_keys,
    const proto::SparseKeySet& helper_keys, SecureRandom* rng, ProofDigest* public_parts) const {
  ClientValueBuffers& buf = ThreadClientValueBuffers();
  std::array<ProofDigest, 2> digests;
  TANDEM_RETURN_IF_ERROR(ClientValues(leader_keys, helper_keys, &buf.derived, &buf.u0, &buf.u1,
                                      &digests, public_parts));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> witness, circuit().Witness(buf.u0, buf.u1));
  return ProveWithDigests(report_id, leader_keys, helper_keys, buf.derived, witness, digests, rng);
}

absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>>
NormProofSystem::ProveWithWitness(absl::string_view report_id,
                                  const proto::SparseKeySet& leader_keys,
                                  const proto::SparseKeySet& helper_keys,
                                  absl::Span<const uint64_t> derived,
                                  absl::Span<const uint64_t> witness, SecureRandom* rng) const {
  SparseDpfScratch scratch;
  std::array<ProofDigest, 2> digests;
  // Adversarial tests and vectors: each set's digest on its own.
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
  const std::string seeds0 = KeySeeds(leader_keys), seeds1 = KeySeeds(helper_keys);
  return core_.Prove(report_id, derived, witness, {seeds0, Bytes(digests[0])},
                     {seeds1, Bytes(digests[1])}, rng);
}

absl::Status NormProofSystem::ValidateShare(const proto::NormProofShare& share, int party) const {
  return core_.ValidateShare(share, party);
}

absl::Status NormProofSystem::DeriveInputShare(int party, absl::Span<const uint64_t> expansion,
                                               absl::Span<uint64_t> derived) const {
  const size_t n = circuit().num_values();
  const size_t b = static_cast<size_t>(circuit().block_size());
  const size_t group_dim = dpf_.group_dimension();
  if (expansion.size() != group_dim * circuit().num_blocks() || derived.size() != 2 * n) {
    return absl::InvalidArgumentError("DeriveInputShare: expansion or output size mismatch");
  }
  for (int g = 0; g < circuit().num_blocks(); ++g) {
    TANDEM_RETURN_IF_ERROR(
        circuit().DeriveGroupShare(party, expansion.subspan(g * group_dim, group_dim),
                                   derived.subspan(g * b, b), derived.subspan(n + g * b, b)));
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
    absl::Span<uint64_t> accumulator, absl::Span<uint64_t> derived, SparseDpfScratch* scratch,
    const ProofDigest* public_digest) const {
  if (dpf.num_groups() != circuit().num_blocks() || dpf.block_size() != circuit().block_size() ||
      dpf.value_bits() != circuit().value_bits() ||
      dpf.blocks_per_group() != dpf_.blocks_per_group()) {
    return absl::InvalidArgumentError("EvaluateAndDerive: DPF parameters differ from the proof's");
  }
  if (derived.size() != circuit().derived_length() || (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("EvaluateAndDerive: bad output size or party");
  }
  // The block sums go to derived's second half, then are split in place.
  const absl::Span<uint64_t> sums = derived.subspan(circuit().num_values());
  TANDEM_ASSIGN_OR_RETURN(
      ProofDigest digest,
      accumulator.empty()
          ? dpf.EvaluateBlockSums(keys, sums, scratch, public_digest)
          : dpf.EvaluateAccumulateAndSum(keys, accumulator, sums, scratch, public_digest));
  TANDEM_RETURN_IF_ERROR(circuit().DeriveFromBlockSums(party, sums, derived));
  return digest;
}

absl::StatusOr<proto::NormProofVerifierShare> NormProofSystem::Query(
    int party, absl::string_view report_id, const proto::SparseKeySet& keys,
    const proto::NormProofShare& share, absl::Span<const uint64_t> derived,
    const ProofDigest& digest, absl::string_view query_seed) const {
  const std::string seeds = KeySeeds(keys);
  return core_.Query(party, report_id, share, derived, {seeds, Bytes(digest)}, query_seed);
}

bool NormProofSystem::Decide(const proto::NormProofVerifierShare& a,
                             const proto::NormProofVerifierShare& b) const {
  return core_.Decide(a, b);
}

absl::StatusOr<std::vector<uint64_t>> NormProofSystem::QueryPoints(
    absl::string_view query_seed, absl::string_view report_id) const {
  return core_.QueryPoints(query_seed, report_id);
}

uint64_t L2SquaredBoundForClip(double clip_l2_norm, int frac_bits, uint64_t num_values) {
  const double r = clip_l2_norm * std::ldexp(1.0, frac_bits) +
                   0.5 * std::sqrt(static_cast<double>(num_values));
  return static_cast<uint64_t>(std::ceil(r * r));
}

}  // namespace tandem::crypto::proof
