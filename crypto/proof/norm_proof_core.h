// The encoding-independent half of tandem's norm-bound proofs: the FLP of
// crypto/proof/flp.h on the validity circuit of crypto/proof/norm_circuit.h,
// split between the two servers (the Prio3 shape of the CFRG VDAF draft,
// Boneh et al., CRYPTO 2019), given each party's derived input share.
//
// What differs per report encoding is how the derived shares come out of a
// server's report share and what binds the joint randomness to that share:
// PREAMBLE's block-DPF keys (norm_proof.h: the keys' seeds and VDPF digest)
// or a dense additive share (dense_norm_proof.h: the leader's values or the
// helper's seed). Each passes its own `ShareBinding` and its own domain tag
// for the joint-randomness parts, so a proof made for one encoding never
// verifies under the other.
//
// Joint randomness (Fiat-Shamir): part_b = SHA-256(part domain, blind_b,
// report id, binding_b[0], binding_b[1], witness share or helper seed);
// seed = SHA-256("tandem.normproof.jr.v5", part_0, part_1); weights from the
// seed (XOF). Query points from the servers' secret query seed and the
// report id. Soundness: norm_circuit.h.
//
// Immutable after construction; thread-safe for const use.
#ifndef TANDEM_CRYPTO_PROOF_NORM_PROOF_CORE_H_
#define TANDEM_CRYPTO_PROOF_NORM_PROOF_CORE_H_

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
#include "crypto/proof/norm_circuit.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto::proof {

inline constexpr size_t kQuerySeedBytes = 32;

// What a party's joint-randomness part commits to besides its proof share:
// two byte strings that determine the party's report share.
using ShareBinding = std::array<absl::string_view, 2>;

class NormProofCore {
 public:
  // `part_domain`: the encoding's domain tag for the joint-randomness parts
  // (static storage).
  NormProofCore(NormCircuit circuit, absl::string_view part_domain)
      : circuit_(std::move(circuit)), part_domain_(part_domain) {}

  const NormCircuit& circuit() const { return circuit_; }

  // Client: the (leader, helper) proof shares for the full derived values
  // and the witness. INVALID_ARGUMENT on lengths or a witness element >= p;
  // rng errors propagate.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> Prove(
      absl::string_view report_id, absl::Span<const uint64_t> derived,
      absl::Span<const uint64_t> witness, const ShareBinding& leader_binding,
      const ShareBinding& helper_binding, SecureRandom* rng) const;

  // INVALID_ARGUMENT unless `share` has exactly the fields of `party`
  // (0: witness, proof, blind, peer part; 1: seed, blind, peer part) with
  // the right lengths and every element < p.
  absl::Status ValidateShare(const proto::NormProofShare& share, int party) const;

  // Server: this party's verifier share from its derived input share.
  // INVALID_ARGUMENT for a malformed share or a query seed that is not 32
  // bytes.
  absl::StatusOr<proto::NormProofVerifierShare> Query(int party, absl::string_view report_id,
                                                      const proto::NormProofShare& share,
                                                      absl::Span<const uint64_t> derived,
                                                      const ShareBinding& own_binding,
                                                      absl::string_view query_seed) const;

  // Both servers: true iff the two verifier shares carry the same
  // joint-randomness seed, are well formed and the FLP accepts.
  bool Decide(const proto::NormProofVerifierShare& a, const proto::NormProofVerifierShare& b) const;

  // The Q query points of a report (norm_proof.h).
  absl::StatusOr<std::vector<uint64_t>> QueryPoints(absl::string_view query_seed,
                                                    absl::string_view report_id) const;

 private:
  absl::StatusOr<std::string> JointRandPart(absl::string_view blind, absl::string_view report_id,
                                            const ShareBinding& share,
                                            absl::string_view binding) const;
  absl::StatusOr<std::vector<uint64_t>> Weights(absl::string_view joint_rand_seed) const;
  // Weights into `weights` (resized; its storage reused).
  absl::Status WeightsInto(absl::string_view joint_rand_seed, std::vector<uint64_t>* weights) const;
  absl::Status ExpandHelperShares(absl::string_view seed, std::vector<uint64_t>* witness,
                                  std::vector<uint64_t>* proof) const;

  NormCircuit circuit_;
  absl::string_view part_domain_;
};

// The client's values of a proof (the derived field shares, both parties'
// ring values u0 and u1, one party's derived share), reused by the calling
// thread from proof to proof by NormProofSystem and DenseNormProof alike:
// at D = 2^17 they are ~5 MB, whose per-proof zero fills and page faults
// cost as much as the rest of the proof (perf, 2026-12-06). Callers resize
// each vector and write every element before reading it; a proof never
// nests another on the same thread. Thread-safe: one set per thread.
struct ClientValueBuffers {
  std::vector<uint64_t> derived, u0, u1, share;
};
ClientValueBuffers& ThreadClientValueBuffers();

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NORM_PROOF_CORE_H_
