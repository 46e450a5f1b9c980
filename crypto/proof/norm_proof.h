// Norm-bound proofs for PREAMBLE's k-block-sparse reports (Asi et al.,
// NeurIPS 2025), checked by both aggregators on their secret shares: the
// validity circuit of crypto/proof/norm_circuit.h proved with the fully
// linear proof of crypto/proof/flp.h (Boneh et al., CRYPTO 2019; the
// Prio3 shape of the CFRG VDAF draft).
//
//   client                         leader (party 0)          helper (party 1)
//   keys = SparseDpf::GenerateKeys
//   u_b = its own keys' outputs on the sent blocks; witness; joint
//   randomness; FLP proof; shares:
//     keys.0 + NormProofShare{witness, proof, blind_0, part_1} --> leader
//     keys.1 + NormProofShare{seed, blind_1, part_0} ------------------> helper
//                                  full-domain evaluation    (same)
//                                  -> VDPF digest + derived limb shares
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
// every block but one per group to cancel exactly.
//
// Joint randomness (Fiat-Shamir, as Prio3): part_b = SHA-256(domain, blind_b,
// report id, this server's key share, its witness share or seed); seed =
// SHA-256(domain, part_0, part_1). Each server recomputes its own part and
// takes the other's from its message; the seeds are compared in Decide, so a
// client that lies about a part is rejected. Query randomness: Q = 2 points
// from SHA-256(query seed, report id), the query seed being a secret of the
// two servers (the leader draws it per round, see aggregator/core), so the
// points are unpredictable to the client; points in {0..T-1} are skipped.
//
// Soundness per report: 1/p (weights) + (3(N-1)/(p-T))^2 (queries), about
// 2^-61 at D = 2^20, B = 2^10, k = 16 (SoundnessLog2()); <= 2^-60 is checked
// by Create(). A client that grinds q Fiat-Shamir attempts gets <= q/p.
// Zero knowledge: flp.h; each server's shares are uniform on their own.
//
// Immutable after Create; thread-safe for const use.
#ifndef TANDEM_CRYPTO_PROOF_NORM_PROOF_H_
#define TANDEM_CRYPTO_PROOF_NORM_PROOF_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dpf/block_dpf.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/norm_circuit.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto::proof {

inline constexpr size_t kQuerySeedBytes = 32;

class NormProofSystem {
 public:
  // INVALID_ARGUMENT for group parameters BlockDpf rejects, bounds
  // NormCircuit rejects, or a soundness error above 2^-60.
  static absl::StatusOr<NormProofSystem> Create(const proto::BlockDpfParameters& group,
                                                uint32_t num_groups,
                                                const proto::NormBoundParameters& bound);

  const NormCircuit& circuit() const { return circuit_; }
  double SoundnessLog2() const { return circuit_.SoundnessLog2(); }

  // Client: proof shares (leader's, helper's) for a key pair produced by
  // SparseDpf::GenerateKeys on these parameters, whose group g encodes block
  // block_index_per_group[g]. INVALID_ARGUMENT when the values exceed a
  // bound (an honest client cannot prove them) or on malformed input; rng
  // errors propagate.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> Prove(
      absl::string_view report_id, const proto::SparseKeySet& leader_keys,
      const proto::SparseKeySet& helper_keys, absl::Span<const uint32_t> block_index_per_group,
      SecureRandom* rng) const;

  // The proof for an arbitrary witness (no bound check): what Prove() does
  // after computing the honest witness. For adversarial tests and vectors.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> ProveWithWitness(
      absl::string_view report_id, const proto::SparseKeySet& leader_keys,
      const proto::SparseKeySet& helper_keys, absl::Span<const uint64_t> derived,
      absl::Span<const uint64_t> witness, SecureRandom* rng) const;

  // Client side of the derivation: the full derived values (X_lo, X_hi) and
  // u_0, u_1 of the sent blocks, from both key sets. INVALID_ARGUMENT.
  absl::Status SentBlockValues(const proto::SparseKeySet& leader_keys,
                               const proto::SparseKeySet& helper_keys,
                               absl::Span<const uint32_t> block_index_per_group,
                               std::vector<uint64_t>* derived, std::vector<uint64_t>* u0,
                               std::vector<uint64_t>* u1) const;

  // INVALID_ARGUMENT unless `share` has exactly the fields of `party`
  // (0: witness, proof, blind, peer part; 1: seed, blind, peer part) with
  // the right lengths and every element < p.
  absl::Status ValidateShare(const proto::NormProofShare& share, int party) const;

  // Server: this party's derived input share from its full-domain
  // evaluation (num_groups * 2^d * B outputs, as SparseDpf produces them).
  absl::Status DeriveInputShare(int party, absl::Span<const uint64_t> expansion,
                                absl::Span<uint64_t> derived) const;

  // Server: the VDPF digest (the bytes of SparseDpf::ComputeProofDigest) and
  // this party's derived input share from ONE full-domain evaluation, each
  // block's limbs summed while the evaluation has it in L1 (SparseLeafSink):
  // no D-sized buffer, no second pass. Same values as EvaluateAndAccumulate
  // into zeros followed by DeriveInputShare. INVALID_ARGUMENT when `dpf`
  // has other parameters, on sizes, or for keys that do not validate.
  absl::StatusOr<ProofDigest> EvaluateAndDerive(const SparseDpf& dpf, int party,
                                                const proto::SparseKeySet& keys,
                                                absl::Span<uint64_t> derived,
                                                SparseDpfScratch* scratch) const;

  // Server: this party's verifier share. REQUIRES a validated share and
  // keys; INVALID_ARGUMENT for a query seed that is not 32 bytes.
  absl::StatusOr<proto::NormProofVerifierShare> Query(
      int party, absl::string_view report_id, const proto::SparseKeySet& keys,
      const proto::NormProofShare& share, absl::Span<const uint64_t> derived,
      absl::string_view query_seed) const;

  // Both servers: true iff the two verifier shares (either order) carry the
  // same joint-randomness seed, are well formed and the FLP accepts.
  bool Decide(const proto::NormProofVerifierShare& a,
              const proto::NormProofVerifierShare& b) const;

  // The Q query points of a report (skipping {0..T-1} and repeats).
  absl::StatusOr<std::vector<uint64_t>> QueryPoints(absl::string_view query_seed,
                                                    absl::string_view report_id) const;

 private:
  NormProofSystem(NormCircuit circuit, BlockDpf dpf) : circuit_(std::move(circuit)), dpf_(std::move(dpf)) {}

  // part_b over the key share and `binding` (witness bytes or seed).
  absl::StatusOr<std::string> JointRandPart(absl::string_view blind, absl::string_view report_id,
                                            const proto::SparseKeySet& keys,
                                            absl::string_view binding) const;
  absl::StatusOr<std::vector<uint64_t>> Weights(absl::string_view joint_rand_seed) const;
  // The helper's witness and proof shares from its seed.
  absl::Status ExpandHelperShares(absl::string_view seed, std::vector<uint64_t>* witness,
                                  std::vector<uint64_t>* proof) const;

  NormCircuit circuit_;
  BlockDpf dpf_;
};

// ceil((C * 2^f + sqrt(n) / 2)^2): the squared norm of a fixed-point
// encoding (round to nearest) of a vector of L2 norm <= C with n
// coordinates. A round's bound; the DP analysis is over C.
uint64_t L2SquaredBoundForClip(double clip_l2_norm, int frac_bits, uint64_t num_values);

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NORM_PROOF_H_
