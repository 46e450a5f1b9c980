// Norm-bound proofs for PREAMBLE's k-block-sparse reports (Asi et al.,
// NeurIPS 2025), checked by both aggregators on their secret shares: the
// validity circuit of crypto/proof/norm_circuit.h proved with the fully
// linear proof of crypto/proof/flp.h (Boneh et al., CRYPTO 2019; the
// Prio3 shape of the CFRG VDAF draft).
//
//   client                         leader (party 0)          helper (party 1)
//   keys = SparseDpf::GenerateKeys
//   u_b from the block sums of each key set (norm_circuit.h); witness;
//   joint randomness; FLP proof; shares:
//     keys.0 + NormProofShare{witness, proof, blind_0, part_1} --> leader
//     keys.1 + NormProofShare{seed, blind_1, part_0} ------------------> helper
//                                  full-domain evaluation    (same)
//                                  -> VDPF digest + block sums -> derived shares
//                                  Query(query seed, id)     Query
//                                  --- VerifyRequest: digest, verifier share --->
//                                  <-- VerifyResponse: digest, verifier share ---
//                                  Decide(both shares)       Decide(both shares)
//
// Design [I]: option (a)/(b) of the issue (F_p copies of the block values
// beside the Z_2^64 keys) needs a cross-ring consistency argument that we
// could not make sound without an extra conversion protocol, and option (c)
// (aggregating in F_p) changes every decoder. Instead the proof is about the
// limbs of the Z_2^w outputs themselves (norm_circuit.h), so the proved
// values are exactly the aggregated ones; the VDPF digest already forces
// every block but one per group to cancel.
//
// Joint randomness (Fiat-Shamir, as Prio3): part_b = SHA-256(domain, blind_b,
// report id, this server's key share, its witness share or seed); seed =
// SHA-256(domain, part_0, part_1). The key share enters as its parties and
// leaf-tree seeds plus its VDPF digest [I]: the digest already hashes every
// public part of the keys (correction words, value and proof corrections,
// ~128 KB at D = 2^20), so with the seeds it determines the key share under
// SHA-256's collision resistance, and the server hashes those 128 KB once
// (in the evaluation) instead of twice. Each server recomputes its own part and
// takes the other's from its message; the seeds are compared in Decide, so a
// client that lies about a part is rejected. Query randomness: Q = 2 points
// from SHA-256(query seed, report id), the query seed being a secret of the
// two servers (the leader draws it per round, see aggregator/core), so the
// points are unpredictable to the client; points of the proof domain are
// skipped.
//
// Protocol v5 (domain tags "tandem.normproof.*.v5", "tandem.densenorm.part.v3";
// XOF "tandem.proof.xof.v4", unchanged): the field is F_p, p = 2^64 - 2^32
// + 1 (crypto/field/goldilocks.h) and the FLP works on a power-of-two
// subgroup with NTTs (crypto/proof/flp.h), on rows of range checks
// x^3 - x and a weighted sum of squares, with the constraint weights outside
// the wires (norm_circuit.h): three wires per sent value where v4 (Cubic(a,
// x) = a (x^2 - 1), the weights inside the wires) had six, and ternary
// slack digits, so the prover runs about half the NTTs and the proof is
// shorter (1,184 elements instead of 1,552 at D = 2^20, B = 2^10, k = 16).
// A v4, v3 or v2 share has another proof length for the same parameters
// (ValidateShare rejects it with a message naming protocol v5), and its
// elements would verify against other tags: the servers reject, never
// crash.
//
// Soundness per report: 2/(p-1) (weights) + ((3N-1)/(p-3N-Q))^2 (queries),
// about 2^-63 at D = 2^20, B = 2^10, k = 16 (N = 256; SoundnessLog2()); <= 2^-60
// is checked by Create(). A client that grinds q Fiat-Shamir attempts gets
// <= 2q/(p-1).
// Zero knowledge: flp.h; each server's shares are uniform on their own.
//
// Immutable after Create; thread-safe for const use.
#ifndef TANDEM_CRYPTO_PROOF_NORM_PROOF_H_
#define TANDEM_CRYPTO_PROOF_NORM_PROOF_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/norm_circuit.h"
#include "crypto/proof/norm_proof_core.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto::proof {

class NormProofSystem {
 public:
  // INVALID_ARGUMENT for group parameters BlockDpf rejects, bounds
  // NormCircuit rejects, or a soundness error above 2^-60.
  static absl::StatusOr<NormProofSystem> Create(const proto::BlockDpfParameters& group,
                                                uint32_t num_groups,
                                                const proto::NormBoundParameters& bound);

  const NormCircuit& circuit() const { return core_.circuit(); }
  double SoundnessLog2() const { return circuit().SoundnessLog2(); }

  // Client: proof shares (leader's, helper's) for a key pair produced by
  // SparseDpf::GenerateKeys on these parameters. Evaluates both key sets
  // (two full-domain block sums, ~2 ms at D = 2^20). INVALID_ARGUMENT when
  // the values exceed a bound (an honest client cannot prove them) or on
  // malformed input; rng errors propagate. `public_parts`, when not null,
  // receives P of leader_keys (crypto/dpf/public_digest.h), which the proof
  // hashed anyway: the device's signatures need it too (SignUploadPair).
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> Prove(
      absl::string_view report_id, const proto::SparseKeySet& leader_keys,
      const proto::SparseKeySet& helper_keys, SecureRandom* rng,
      ProofDigest* public_parts = nullptr) const;

  // The proof for an arbitrary witness (no bound check): what Prove() does
  // after computing the honest witness. For adversarial tests and vectors.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> ProveWithWitness(
      absl::string_view report_id, const proto::SparseKeySet& leader_keys,
      const proto::SparseKeySet& helper_keys, absl::Span<const uint64_t> derived,
      absl::Span<const uint64_t> witness, SecureRandom* rng) const;

  // Client side of the derivation: the full derived values (X_lo, X_hi) and
  // u_0, u_1 (n each, from the block sums), from both key sets, and, when
  // `digests` is non-null, both key sets' VDPF digests (the same evaluation
  // gives them; the public parts, the same in both sets, hashed once; P of
  // leader_keys into `public_parts` when that is not null as well).
  // INVALID_ARGUMENT for key sets that do not validate.
  absl::Status ClientValues(const proto::SparseKeySet& leader_keys,
                            const proto::SparseKeySet& helper_keys, std::vector<uint64_t>* derived,
                            std::vector<uint64_t>* u0, std::vector<uint64_t>* u1,
                            std::array<ProofDigest, 2>* digests = nullptr,
                            ProofDigest* public_parts = nullptr) const;

  // INVALID_ARGUMENT unless `share` has exactly the fields of `party`
  // (0: witness, proof, blind, peer part; 1: seed, blind, peer part) with
  // the right lengths and every element < p.
  absl::Status ValidateShare(const proto::NormProofShare& share, int party) const;

  // Server: this party's derived input share from its full-domain
  // evaluation (num_groups * 2^d * B outputs, as SparseDpf produces them).
  absl::Status DeriveInputShare(int party, absl::Span<const uint64_t> expansion,
                                absl::Span<uint64_t> derived) const;

  // Server: the VDPF digest (the bytes of SparseDpf::ComputeProofDigest) and
  // this party's derived input share from ONE full-domain evaluation whose
  // leaves are summed per group inside the AES kernel
  // (SparseDpf::EvaluateBlockSums): no D-sized buffer, no second pass. Same
  // values as EvaluateAndAccumulate into zeros followed by DeriveInputShare. INVALID_ARGUMENT when `dpf`
  // has other parameters, on sizes, or for keys that do not validate.
  absl::StatusOr<ProofDigest> EvaluateAndDerive(const SparseDpf& dpf, int party,
                                                const proto::SparseKeySet& keys,
                                                absl::Span<uint64_t> derived,
                                                SparseDpfScratch* scratch) const;

  // As EvaluateAndDerive, and also accumulator += this party's shares
  // (SparseDpf::EvaluateAccumulateAndSum; accumulator.size() ==
  // dpf.dimension()): verification and aggregation share one expansion.
  // Same errors, raised before anything is added.
  // `public_digest`: PublicPartsDigest(keys) when the caller has it (the
  // upload hashed it), else null (computed here).
  absl::StatusOr<ProofDigest> EvaluateAccumulateAndDerive(
      const SparseDpf& dpf, int party, const proto::SparseKeySet& keys,
      absl::Span<uint64_t> accumulator, absl::Span<uint64_t> derived, SparseDpfScratch* scratch,
      const ProofDigest* public_digest = nullptr) const;

  // Server: this party's verifier share. `digest`: the VDPF digest of this
  // party's own evaluation of `keys` (EvaluateAndDerive). REQUIRES validated
  // keys; INVALID_ARGUMENT for a malformed share or a query seed that is not
  // 32 bytes.
  absl::StatusOr<proto::NormProofVerifierShare> Query(
      int party, absl::string_view report_id, const proto::SparseKeySet& keys,
      const proto::NormProofShare& share, absl::Span<const uint64_t> derived,
      const ProofDigest& digest, absl::string_view query_seed) const;

  // Both servers: true iff the two verifier shares (either order) carry the
  // same joint-randomness seed, are well formed and the FLP accepts.
  bool Decide(const proto::NormProofVerifierShare& a,
              const proto::NormProofVerifierShare& b) const;

  // The Q query points of a report: 8-byte words of SHA-256(query domain,
  // query seed, report id, counter), rejecting words >= p, proof-domain
  // points (flp.h) and repeats.
  absl::StatusOr<std::vector<uint64_t>> QueryPoints(absl::string_view query_seed,
                                                    absl::string_view report_id) const;

 private:
  NormProofSystem(NormCircuit circuit, SparseDpf dpf)
      : core_(std::move(circuit), kPartDomain), dpf_(std::move(dpf)) {}
  static constexpr absl::string_view kPartDomain = "tandem.normproof.part.v5";

  // ProveWithWitness given both key sets' VDPF digests.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> ProveWithDigests(
      absl::string_view report_id, const proto::SparseKeySet& leader_keys,
      const proto::SparseKeySet& helper_keys, absl::Span<const uint64_t> derived,
      absl::Span<const uint64_t> witness, const std::array<ProofDigest, 2>& digests,
      SecureRandom* rng) const;

  NormProofCore core_;  // the FLP shares; binds each party's keys (seeds + VDPF digest)
  SparseDpf dpf_;  // the report's shape: num_groups groups of 2^d blocks
};

// ceil((C * 2^f + sqrt(n) / 2)^2): the squared norm of a fixed-point
// encoding (round to nearest) of a vector of L2 norm <= C with n
// coordinates. A round's bound; the DP analysis is over C.
uint64_t L2SquaredBoundForClip(double clip_l2_norm, int frac_bits, uint64_t num_values);

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NORM_PROOF_H_
