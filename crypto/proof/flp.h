// A fully linear proof (FLP) for circuits of range constraints x^3 - x = 0
// and weighted sums of squares over F_p, grouped into rows of a ParallelSum
// gadget: Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Zero-Knowledge
// Proofs on Secret-Shared Data via Fully Linear PCPs" (CRYPTO 2019),
// Theorem 4.3 (the G-gate construction) with the ParallelSum gadget of
// Prio3 (CFRG VDAF draft, FlpBBCGGI19). Facts and formulas only; no code
// was taken.
//
// The gadget (protocol v5, our design [I]). Every constraint of the norm
// circuit (crypto/proof/norm_circuit.h) is either a range check of one
// secret value in {-1, 0, 1} or a square in a weighted sum, so a row of the
// gadget takes one public weight a, r range inputs x_t and s square inputs
// v_u (arity 1 + r + s, degree 3):
//   G(a, x, v) = sum_t rho_t (x_t^3 - x_t) + a sum_u v_u^2,
// with rho_t public slot weights (from the joint randomness, part of G).
// The circuit's output is y = sum_i s_i G(row i) + affine, with public row
// weights s_i: a linear function of the gadget outputs, so the verifier
// takes it from the proof polynomial's values on H at no extra cost. A
// range check thus costs one wire (its weight s_i rho_t is outside the
// wire), where protocol v4's Cubic(a, x) = a (x^2 - 1) needed two, (rho c,
// c), for the same constraint; the public weight a of every square is one
// wire per row rather than one per square.
//
// Shape. M' rows laid out on the wire domain H = {omega^x} of order N =
// 2^k >= Q + M' (Q = number of query points), as Prio3's FLP uses a
// power-of-two subgroup (CFRG VDAF draft, FlpBBCGGI19); proof domain H u
// gH u g^2 H (3N points, g = 7; crypto/proof/ntt.h). Missing rows and
// unused slots are zero, and G(0, 0, 0) = 0. Field: F_p, p = 2^64 - 2^32 +
// 1 (crypto/field/goldilocks.h).
//
//   prover (knows the inputs)        verifier b (holds additive shares)
//   wire l: f_l of degree < N,       wire shares f_l(omega^(Q+i)) = its
//     f_l(omega^q) = seed (q < Q),     input shares; f_l(r), p(r) by
//     f_l(omega^(Q+i)) = input l of    barycentric Lagrange (linear)
//     row i, 0 beyond M'             y = sum_{i<M'} s_i p(omega^(Q+i))
//   p = G(f_0, ..., f_{W-1}),              + affine
//     degree <= 3(N-1), sent as its  --- exchange the shares, then ---
//     values on H, gH, g^2 H (one      accept iff y == 0 and, for each query
//     inverse NTT and two coset        point r: p(r) == G(f(r))
//     NTTs per wire: O(W N log N)).
//
// Proof: W Q wire seeds (wire-major, W = 1 + r + s), then p on H, gH, g^2 H
// (natural order each); length W Q + 3N. Verifier message: 1 + Q (W + 1).
//
// Soundness (Schwartz-Zippel): if some gadget output p(omega^(Q+i)) is
// wrong then p - G(f), p being the interpolant of the 3N sent values
// (degree <= 3N - 1, whatever the prover sent), is a non-zero polynomial
// of degree <= 3N - 1, so a query point r, uniform in F_p outside the 3N
// domain points and the earlier query points, catches it except with
// probability (3N - 1) / (p - 3N - Q); Q points: that to the power Q
// (SoundnessLog2()). The circuit's own error (the random weights behind y)
// is added by the caller (crypto/proof/norm_circuit.h).
//
// Zero knowledge (honest verifier, for pairwise distinct query points
// outside H u gH u g^2 H, which Query() enforces): with Q random seeds per
// wire, (f_l(r_1), ..., f_l(r_Q)) is uniform for every secret wire (wire 0,
// the public weight a, reveals nothing that is not public), p(r_q) is the
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

class RangeSquareFlp {
 public:
  // INVALID_ARGUMENT unless 1 <= num_rows <= 2^24, range_slots <= 2^20,
  // 1 <= square_slots <= 2^20 (wire 0 weights them: without one it would
  // be a wire no check reads), 1 <= num_queries <= 8 and N <= 2^24.
  static absl::StatusOr<RangeSquareFlp> Create(size_t num_rows, size_t range_slots,
                                               size_t square_slots, int num_queries);
  // The wire domain size N = the least power of two >= Q + num_rows.
  static size_t WireDomainSize(size_t num_rows, int num_queries);

  size_t num_rows() const { return rows_; }  // M'
  size_t range_slots() const { return range_; }
  size_t square_slots() const { return square_; }
  size_t wires() const { return 1 + range_ + square_; }  // W: a, x_t, v_u
  int num_queries() const { return queries_; }
  size_t wire_domain_size() const { return domain_.size(); }       // N (a power of two)
  size_t proof_domain_size() const { return 3 * domain_.size(); }  // 3N
  size_t input_length() const { return rows_ * wires(); }          // row-major
  size_t seed_length() const { return wires() * queries_; }
  size_t proof_length() const { return seed_length() + proof_domain_size(); }
  size_t verifier_length() const { return 1 + queries_ * (wires() + 1); }
  // log2 of the query soundness error Q * log2((3N - 1) / (p - 3N - Q)).
  double SoundnessLog2() const;
  // Whether r (< p) is one of the 3N proof-domain points (then it cannot
  // be a query point).
  bool InProofDomain(uint64_t r) const { return domain_.InCosets(r, 3); }

  // The proof for `inputs` (row-major: row i holds a, x_0..x_{r-1},
  // v_0..v_{s-1}) under the slot weights rho (range_slots() of them), with
  // the given wire seeds (uniform field elements; seed_length() of them)
  // into `proof` (proof_length()). Proves any input; whether the circuit
  // is satisfied is the verifier's question. INVALID_ARGUMENT on sizes.
  // REQUIRES: every input, weight and seed < p.
  absl::Status Prove(absl::Span<const uint64_t> inputs, absl::Span<const uint64_t> slot_weights,
                     absl::Span<const uint64_t> wire_seeds, absl::Span<uint64_t> proof) const;

  // One verifier's share of the verifier message: its share of y = sum_i
  // s_i p(omega^(Q+i)) + affine_share (s = row_weights, num_rows() public
  // elements), and of f(r_q), p(r_q) for each query point. INVALID_ARGUMENT
  // on sizes, or for query points in the proof domain, repeated, or >= p.
  // REQUIRES: input, weight and proof share elements < p (the lazy
  // reduction counts on products below p^2).
  absl::Status Query(absl::Span<const uint64_t> input_share, absl::Span<const uint64_t> proof_share,
                     uint64_t affine_share, absl::Span<const uint64_t> row_weights,
                     absl::Span<const uint64_t> query_points,
                     absl::Span<uint64_t> verifier_share) const;

  // Decision on the sum of both verifier shares, with the slot weights the
  // proof was made for. INVALID_ARGUMENT on sizes.
  absl::StatusOr<bool> Decide(absl::Span<const uint64_t> verifier,
                              absl::Span<const uint64_t> slot_weights) const;

 private:
  RangeSquareFlp(size_t rows, size_t range, size_t square, int queries, NttDomain domain)
      : rows_(rows),
        range_(range),
        square_(square),
        queries_(queries),
        domain_(std::move(domain)) {}

  size_t rows_;
  size_t range_;
  size_t square_;
  int queries_;
  NttDomain domain_;  // H, order N; cosets gH, g^2 H
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_FLP_H_
