// A fully linear proof (FLP) for circuits made of M calls of the gadget
// Cubic(a, x) = a (x^2 - 1) over F_p, grouped into a ParallelSum gadget:
// Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Zero-Knowledge Proofs on
// Secret-Shared Data via Fully Linear PCPs" (CRYPTO 2019), Theorem 4.3 (the
// G-gate construction) with the ParallelSum gadget of Prio3 (CFRG VDAF
// draft, FlpBBCGGI19). Facts and formulas only; no code was taken.
//
// The gadget (protocol v4, our design [I]): every constraint of the norm
// circuit is a cubic of one secret value times a weight or a second value
// (c (c^2 - 1), h (h^2 - K^2), the weighted squares, the slack bits:
// crypto/proof/norm_circuit.h), so a gadget of arity 2 and degree 3 covers
// them all. Protocol v3 used Mul3(a, b, e) = a b e (arity 3, the same
// degree): a third more wires, each costing the prover three NTTs and the
// verifier a Lagrange column, and 3cQ instead of 2cQ wire seeds per proof.
//
// Shape. The M calls are laid out in M' = ceil(M / c) ParallelSum calls of
// c Cubic gadgets each (c = chunk length; missing calls are zero, and
// Cubic(0, 0) = 0). G'(w_0..w_{2c-1}) = sum_t w_{2t} (w_{2t+1}^2 - 1) has
// arity 2c and degree 3. Field: F_p, p = 2^64 - 2^32 + 1
// (crypto/field/goldilocks.h). Wire domain: the subgroup H = {omega^x} of
// order N = 2^k >= Q + M' (Q = number of query points), as Prio3's FLP uses
// a power-of-two subgroup (CFRG VDAF draft, FlpBBCGGI19); proof domain:
// H u gH u g^2 H (3N points, g = 7; crypto/proof/ntt.h).
//
//   prover (knows the inputs)        verifier b (holds additive shares)
//   wire l: f_l of degree < N,       wire shares f_l(omega^(Q+i)) = its
//     f_l(omega^q) = seed (q < Q),     input shares; f_l(r), p(r) by
//     f_l(omega^(Q+i)) = input of      barycentric Lagrange (linear)
//     call i, 0 beyond M'            y = sum_{i<M'} p(omega^(Q+i)) + affine
//   p = G'(f_0, ..., f_{2c-1}),      --- exchange the shares, then ---
//     degree <= 3(N-1), sent as its  accept iff y == 0 and, for each query
//     values on H, gH, g^2 H (one      point r: p(r) == G'(f(r))
//     inverse NTT and two coset
//     NTTs per wire: O(c N log N)).
//
// Proof: 2cQ wire seeds (wire-major), then p on H, gH, g^2 H (natural
// order each); length 2cQ + 3N. Verifier message: 1 + Q(2c + 1) elements.
//
// Soundness (Schwartz-Zippel): if some gadget output p(omega^(Q+i)) is
// wrong then p - G'(f), p being the interpolant of the 3N sent values
// (degree <= 3N - 1, whatever the prover sent), is a non-zero polynomial
// of degree <= 3N - 1, so a query point r, uniform in F_p outside the 3N
// domain points and the earlier query points, catches it except with
// probability (3N - 1) / (p - 3N - Q); Q points: that to the power Q
// (SoundnessLog2()). The circuit's own error (the random linear
// combination behind y) is added by the caller (crypto/proof/norm_circuit.h).
//
// Zero knowledge (honest verifier, for pairwise distinct query points
// outside H u gH u g^2 H, which Query() enforces): with Q random seeds per
// wire, (f_l(r_1), ..., f_l(r_Q)) is uniform for every wire, p(r_q) is the
// gadget of those, and y = 0 for a valid input, so the joint verifier
// message is simulatable. A verifier must answer at most Q points per proof.
//
// Immutable after Create; all methods are const and thread-safe.
#ifndef TANDEM_CRYPTO_PROOF_FLP_H_
#define TANDEM_CRYPTO_PROOF_FLP_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/proof/field_vector.h"
#include "crypto/proof/ntt.h"

namespace tandem::crypto::proof {

class ParallelSumCubicFlp {
 public:
  // INVALID_ARGUMENT unless 1 <= num_calls <= 2^24, chunk_length <=
  // num_calls, 1 <= num_queries <= 8 and N <= 2^24. chunk_length 0 picks
  // the c that minimises the proof length 2cQ + 3N (N = the power of two
  // >= Q + ceil(M / c)).
  static absl::StatusOr<ParallelSumCubicFlp> Create(size_t num_calls, size_t chunk_length,
                                                    int num_queries);

  size_t num_calls() const { return num_calls_; }
  size_t chunk_length() const { return chunk_; }
  int num_queries() const { return queries_; }
  size_t num_parallel_calls() const { return parallel_calls_; }  // M'
  size_t wire_domain_size() const { return domain_.size(); }     // N (a power of two)
  size_t proof_domain_size() const { return 3 * domain_.size(); }  // 3N
  size_t input_length() const { return 2 * num_calls_; }           // (a, x) per call
  size_t seed_length() const { return 2 * chunk_ * queries_; }
  size_t proof_length() const { return seed_length() + proof_domain_size(); }
  size_t verifier_length() const { return 1 + queries_ * (2 * chunk_ + 1); }
  // log2 of the query soundness error Q * log2((3N - 1) / (p - 3N - Q)).
  double SoundnessLog2() const;
  // Whether r (< p) is one of the 3N proof-domain points (then it cannot
  // be a query point).
  bool InProofDomain(uint64_t r) const { return domain_.InCosets(r, 3); }

  // The proof for `inputs` (call-major: a_0, x_0, a_1, x_1, ...) with the
  // given wire seeds (uniform field elements; seed_length() of them) into
  // `proof` (proof_length()). Proves any input; whether the circuit is
  // satisfied is the verifier's question. INVALID_ARGUMENT on sizes.
  // REQUIRES: every input and seed < p.
  absl::Status Prove(absl::Span<const uint64_t> inputs, absl::Span<const uint64_t> wire_seeds,
                     absl::Span<uint64_t> proof) const;

  // One verifier's share of the verifier message: shares of y = sum of the
  // gadget outputs + affine_share, and of f(r_q), p(r_q) for each query
  // point. INVALID_ARGUMENT on sizes, or for query points in the proof
  // domain, repeated, or >= p. REQUIRES: input and proof share elements
  // < p (the lazy reduction counts on products below p^2).
  absl::Status Query(absl::Span<const uint64_t> input_share,
                     absl::Span<const uint64_t> proof_share, uint64_t affine_share,
                     absl::Span<const uint64_t> query_points,
                     absl::Span<uint64_t> verifier_share) const;

  // Decision on the sum of both verifier shares. INVALID_ARGUMENT on size.
  absl::StatusOr<bool> Decide(absl::Span<const uint64_t> verifier) const;

 private:
  ParallelSumCubicFlp(size_t num_calls, size_t chunk, int queries, size_t parallel_calls,
                      NttDomain domain)
      : num_calls_(num_calls),
        chunk_(chunk),
        queries_(queries),
        parallel_calls_(parallel_calls),
        domain_(std::move(domain)) {}

  size_t num_calls_;
  size_t chunk_;
  int queries_;
  size_t parallel_calls_;
  NttDomain domain_;  // H, order N; cosets gH, g^2 H
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_FLP_H_
