// Norm-bound proofs for dense reports (crypto/dense/dense_sharing.h): the
// same validity circuit and FLP as PREAMBLE's (norm_circuit.h,
// norm_proof_core.h), over all D values as one block bounded by the
// report's squared L2 bound, so a dense round keeps the malicious-client
// guarantee of a PREAMBLE round (Asi et al., NeurIPS 2025: the bound the
// privacy analysis needs).
//
// Party b's derived share comes straight from its values y_b: u_b =
// (-1)^b y_b mod 2^w, so u_0 - u_1 = y_0 + y_1 = the report (norm_circuit.h
// with a single "block sum" per coordinate). Joint randomness binds the
// leader's packed values and the helper's seed under the domain tag
// "tandem.densenorm.part.v3" (a PREAMBLE proof never verifies here).
// Design choice [I]: one block for the whole vector (the per-block bound of
// PREAMBLE's analysis has no meaning without block sampling); the circuit's
// block bound is set to the total bound, which costs a few more slack digits.
// D <= 2^20 (the circuit's block size limit): dense wins only at small D
// anyway (server/core/upload_baselines.h).
//
// Immutable after Create; thread-safe for const use.
#ifndef TANDEM_CRYPTO_PROOF_DENSE_NORM_PROOF_H_
#define TANDEM_CRYPTO_PROOF_DENSE_NORM_PROOF_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dense/dense_sharing.h"
#include "crypto/proof/norm_circuit.h"
#include "crypto/proof/norm_proof_core.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto::proof {

class DenseNormProof {
 public:
  // INVALID_ARGUMENT unless 1 <= dimension <= 2^20, value_bits is 32 or 64,
  // max_l2_squared is small enough for exact arithmetic (norm_circuit.h),
  // and the soundness error is at most 2^-60. Reads max_l2_squared and
  // chunk_length (values per row) of `bound` (max_block_l2_squared is not
  // used: one block).
  static absl::StatusOr<DenseNormProof> Create(uint64_t dimension, int value_bits,
                                               const proto::NormBoundParameters& bound);

  const NormCircuit& circuit() const { return core_.circuit(); }
  const DenseSharing& sharing() const { return sharing_; }
  double SoundnessLog2() const { return circuit().SoundnessLog2(); }

  // Client: proof shares for a (leader, helper) dense share pair.
  // INVALID_ARGUMENT when the report exceeds the bound (an honest client
  // cannot prove it) or on malformed shares; rng errors propagate.
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> Prove(
      absl::string_view report_id, const proto::DenseShare& leader, const proto::DenseShare& helper,
      SecureRandom* rng) const;
  // The proof for an arbitrary witness (adversarial tests).
  absl::StatusOr<std::pair<proto::NormProofShare, proto::NormProofShare>> ProveWithWitness(
      absl::string_view report_id, const proto::DenseShare& leader, const proto::DenseShare& helper,
      absl::Span<const uint64_t> witness, SecureRandom* rng) const;

  absl::Status ValidateShare(const proto::NormProofShare& share, int party) const {
    return core_.ValidateShare(share, party);
  }

  // Server: this party's derived input share (circuit().derived_length())
  // from its dense share, adding the share's values into `accumulator` in
  // the same pass when it is non-empty (D entries). INVALID_ARGUMENT for a
  // share that does not validate or on sizes, before anything is added.
  absl::Status EvaluateAndDerive(int party, const proto::DenseShare& share,
                                 absl::Span<uint64_t> accumulator,
                                 absl::Span<uint64_t> derived) const;

  // Server: this party's verifier share (REQUIRES `derived` from
  // EvaluateAndDerive of the same share). INVALID_ARGUMENT for a malformed
  // proof share or a query seed that is not 32 bytes.
  absl::StatusOr<proto::NormProofVerifierShare> Query(int party, absl::string_view report_id,
                                                      const proto::DenseShare& share,
                                                      const proto::NormProofShare& proof,
                                                      absl::Span<const uint64_t> derived,
                                                      absl::string_view query_seed) const;

  bool Decide(const proto::NormProofVerifierShare& a,
              const proto::NormProofVerifierShare& b) const {
    return core_.Decide(a, b);
  }

 private:
  static constexpr absl::string_view kPartDomain = "tandem.densenorm.part.v3";
  DenseNormProof(NormCircuit circuit, DenseSharing sharing)
      : core_(std::move(circuit), kPartDomain), sharing_(std::move(sharing)) {}
  // Both parties' full derived values and u_0, u_1.
  absl::Status ClientValues(const proto::DenseShare& leader, const proto::DenseShare& helper,
                            std::vector<uint64_t>* derived, std::vector<uint64_t>* u0,
                            std::vector<uint64_t>* u1) const;

  NormProofCore core_;
  DenseSharing sharing_;
};

// The binding of a dense share in the joint randomness: the leader's packed
// values or the helper's seed.
ShareBinding DenseBinding(const proto::DenseShare& share);

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_DENSE_NORM_PROOF_H_
