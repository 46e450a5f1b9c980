// A fully linear proof (FLP) for circuits made of M calls of the gadget
// Mul3(a, b, e) = a * b * e over F_p, grouped into a ParallelSum gadget:
// Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Zero-Knowledge Proofs on
// Secret-Shared Data via Fully Linear PCPs" (CRYPTO 2019), Theorem 4.3 (the
// G-gate construction) with the ParallelSum gadget of Prio3 (CFRG VDAF
// draft, FlpBBCGGI19). Facts and formulas only; no code was taken.
//
// Shape. The M calls are laid out in M' = ceil(M / c) ParallelSum calls of
// c Mul3 gadgets each (c = chunk length; missing calls are zero). The
// ParallelSum gadget G'(w_0..w_{3c-1}) = sum_t w_{3t} w_{3t+1} w_{3t+2} has
// arity 3c and degree 3. Evaluation domain: the integers {0, ..., N-1},
// N = Q + M', where Q is the number of query points.
//
//   prover (knows the inputs)        verifier b (holds additive shares)
//   wire l: f_l of degree N-1,       wire shares f_l(Q+i) = its input shares
//     f_l(q) = random seed (q < Q),  f_l(r), p(r) by Lagrange (linear)
//     f_l(Q+i) = input of call i     y = sum_i p(Q+i) + affine (linear)
//   p = G'(f_0, ..., f_{3c-1}),      --- exchange the shares, then ---
//     degree 3(N-1), sent as its     accept iff y == 0 and, for each query
//     values on {0, ..., T-1},         point r: p(r) == G'(f(r))
//     T = 3(N-1) + 1.
//
// Proof: 3cQ wire seeds, then p(0..T-1); length 3cQ + T. Verifier message:
// 1 + Q(3c + 1) field elements.
//
// Soundness (Schwartz-Zippel): if some gadget output p(Q+i) is wrong then
// p - G'(f) is a non-zero polynomial of degree <= 3(N-1), so each query
// point r, uniform in F_p \ {0..T-1}, catches it except with probability
// 3(N-1) / (p - T); Q independent points: (3(N-1) / (p - T))^Q
// (SoundnessLog2()). The circuit's own error (the random linear combination
// behind y) is added by the caller (crypto/proof/norm_circuit.h).
//
// Zero knowledge (honest verifier, for any query points outside {0..N-1}
// that are pairwise distinct, which Query() enforces): with Q random seeds
// per wire, (f_l(r_1), ..., f_l(r_Q)) is uniform for every wire, p(r_q) is
// the gadget of those, and y = 0 for a valid input, so the joint verifier
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

namespace tandem::crypto::proof {

class ParallelSumMul3Flp {
 public:
  // INVALID_ARGUMENT unless 1 <= num_calls <= 2^24, 1 <= chunk_length <=
  // num_calls (0 picks ceil(2 sqrt(num_calls))), 1 <= num_queries <= 8.
  static absl::StatusOr<ParallelSumMul3Flp> Create(size_t num_calls, size_t chunk_length,
                                                   int num_queries);

  size_t num_calls() const { return num_calls_; }
  size_t chunk_length() const { return chunk_; }
  int num_queries() const { return queries_; }
  size_t num_parallel_calls() const { return parallel_calls_; }  // M'
  size_t wire_domain_size() const { return wire_domain_.size(); }  // N
  size_t proof_domain_size() const { return proof_domain_.size(); }  // T
  size_t input_length() const { return 3 * num_calls_; }  // (a, b, e) per call
  size_t seed_length() const { return 3 * chunk_ * queries_; }
  size_t proof_length() const { return seed_length() + proof_domain_.size(); }
  size_t verifier_length() const { return 1 + queries_ * (3 * chunk_ + 1); }
  // log2 of the query soundness error Q * log2(3(N-1) / (p - T)).
  double SoundnessLog2() const;

  // The proof for `inputs` (call-major: a_0, b_0, e_0, a_1, ...) with the
  // given wire seeds (uniform field elements; seed_length() of them) into
  // `proof` (proof_length()). Proves any input; whether the circuit is
  // satisfied is the verifier's question. INVALID_ARGUMENT on sizes.
  absl::Status Prove(absl::Span<const uint64_t> inputs, absl::Span<const uint64_t> wire_seeds,
                     absl::Span<uint64_t> proof) const;

  // One verifier's share of the verifier message: shares of y = sum of the
  // gadget outputs + affine_share, and of f(r_q), p(r_q) for each query
  // point. INVALID_ARGUMENT on sizes, or for query points inside {0..T-1},
  // repeated, or >= p. REQUIRES: input and proof share elements < p (the
  // lazy reduction counts on products below 2^122).
  absl::Status Query(absl::Span<const uint64_t> input_share,
                     absl::Span<const uint64_t> proof_share, uint64_t affine_share,
                     absl::Span<const uint64_t> query_points,
                     absl::Span<uint64_t> verifier_share) const;

  // Decision on the sum of both verifier shares. INVALID_ARGUMENT on size.
  absl::StatusOr<bool> Decide(absl::Span<const uint64_t> verifier) const;

 private:
  ParallelSumMul3Flp(size_t num_calls, size_t chunk, int queries, size_t parallel_calls,
                     LagrangeDomain wire_domain, LagrangeDomain proof_domain)
      : num_calls_(num_calls),
        chunk_(chunk),
        queries_(queries),
        parallel_calls_(parallel_calls),
        wire_domain_(std::move(wire_domain)),
        proof_domain_(std::move(proof_domain)) {}

  // Value at domain point x of wire l (x >= Q), from the call-major inputs.
  uint64_t InputAt(absl::Span<const uint64_t> inputs, size_t l, size_t x) const;

  size_t num_calls_;
  size_t chunk_;
  int queries_;
  size_t parallel_calls_;
  LagrangeDomain wire_domain_;   // N = Q + M' points
  LagrangeDomain proof_domain_;  // T = 3(N-1) + 1 points
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_FLP_H_
