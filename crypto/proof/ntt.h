// Number-theoretic transforms and barycentric evaluation over the
// multiplicative subgroup H = <omega> of order n = 2^k of F_p, p = 2^64 -
// 2^32 + 1 (crypto/field/goldilocks.h), and over unions of its cosets
// h_s H, h_s = g^s (g = 7 generates F_p^*), for the FLP of
// crypto/proof/flp.h.
//
// Transforms (Cooley-Tukey radix 2; e.g. Cormen et al., "Introduction to
// Algorithms", 3rd ed., Section 30.3): with f(x) = sum_j c_j x^j of degree
// < n,
//   ValuesToCoefficients: f(omega^i) in natural order -> n c_j in
//     bit-reversed order (decimation in frequency with omega^-1; the 1/n is
//     left to the caller, who folds it into the next scaling);
//   CoefficientsToValues: coefficients in bit-reversed order -> f(omega^i)
//     in natural order (decimation in time).
// So f on the coset h H is CoefficientsToValues of c_j h^j: no bit-reversal
// permutation is ever needed (CosetScale() gives the factors h^j / n in the
// bit-reversed order).
//
// Barycentric Lagrange formula (Berrut and Trefethen, "Barycentric Lagrange
// Interpolation", SIAM Review 46(3), 2004, Section 3) over the union U of m
// cosets h_s H, with c_s = h_s^n pairwise distinct: the vanishing
// polynomial is Z(x) = prod_s (x^n - c_s), and at x = h_s omega^i,
// Z'(x) = n x^(n-1) prod_{s' != s} (c_s - c_s') = d_s / x with
// d_s = n c_s prod_{s' != s} (c_s - c_s'). Hence for r outside U
//   L_{s,i}(r) = Z(r) x / (d_s (r - x)),   x = h_s omega^i,
// and f(r) = sum L_{s,i}(r) f(x) for every f of degree < m n. (m = 1:
// L_i(r) = (r^n - 1) omega^i / (n (r - omega^i)).)
//
// Speed: with AVX2 (crypto/proof/goldilocks_lanes.h) the butterflies run
// four at a time in vector lanes, interleaved with scalar ones (ntt.cc);
// the outputs are bit-identical to the portable transforms'.
//
// Constant time: loop bounds depend on n only, branches on public
// evaluation points only; the field arithmetic is branch-free.
// Immutable after Create; thread-safe.
#ifndef TANDEM_CRYPTO_PROOF_NTT_H_
#define TANDEM_CRYPTO_PROOF_NTT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/proof/field_vector.h"

namespace tandem::crypto::proof {

class NttDomain {
 public:
  static constexpr int kMaxCosets = 3;

  // INVALID_ARGUMENT unless 0 <= log_size <= 24.
  static absl::StatusOr<NttDomain> Create(int log_size);

  size_t size() const { return n_; }
  int log_size() const { return log_n_; }
  // omega^i, the i-th point of H (i < n).
  uint64_t Point(size_t i) const { return points_[i]; }
  // h_s = g^s, the shift of coset s (s < kMaxCosets; h_0 = 1).
  uint64_t CosetShift(int s) const { return shifts_[s]; }

  // In place, data.size() == n: values on H (natural order) -> n times the
  // coefficients, bit-reversed. Inputs and outputs are "relaxed": any
  // uint64_t congruent to the element (gl::Mul accepts them; gl::Reduce64
  // makes them canonical).
  void ValuesToCoefficients(absl::Span<uint64_t> data) const;
  // In place: coefficients (bit-reversed) -> values on H (natural order).
  // Relaxed in and out, as above.
  void CoefficientsToValues(absl::Span<uint64_t> data) const;
  // out = f on the coset h_s H from coeffs, the output of
  // ValuesToCoefficients: out[j] = gl::Mul(coeffs[j], CosetScale(s)[j]),
  // then CoefficientsToValues (fused). coeffs relaxed, out relaxed;
  // sizes n; s < kMaxCosets.
  void CoefficientsToCosetValues(absl::Span<const uint64_t> coeffs, int s,
                                 absl::Span<uint64_t> out) const;
  // The portable transforms: the two above use the AVX2 lanes of
  // crypto/proof/goldilocks_lanes.h when the build has them (n >= 8), with
  // the same butterflies in the same order, hence bit-identical outputs
  // (relaxed values included; ntt_test.cc compares them).
  void ValuesToCoefficientsPortable(absl::Span<uint64_t> data) const;
  void CoefficientsToValuesPortable(absl::Span<uint64_t> data) const;
  // factors[j] = h_s^rev(j) / n (rev = k-bit reversal): multiplying the
  // output of ValuesToCoefficients by these and applying
  // CoefficientsToValues gives f(h_s omega^i). s < kMaxCosets.
  absl::Span<const uint64_t> CosetScale(int s) const { return scale_[s]; }

  // Whether r lies in h_0 H, ..., h_{cosets-1} H (r^n = c_s for some s).
  bool InCosets(uint64_t r, int cosets) const;
  // out[s n + i] = L_{s,i}(r) over the first `cosets` cosets (see above).
  // REQUIRES: 1 <= cosets <= kMaxCosets, r < p and !InCosets(r, cosets),
  // out.size() == cosets * n.
  void LagrangeCoefficients(uint64_t r, int cosets, absl::Span<uint64_t> out) const;

 private:
  NttDomain() = default;

  int log_n_ = 0;
  size_t n_ = 1;
  std::vector<uint64_t> points_;      // omega^i, i < n
  std::vector<uint64_t> roots_;       // roots_[m + j] = omega_{2m}^j, m = 1, 2, .., n/2
  std::vector<uint64_t> inv_roots_;   // the same for omega^-1
  uint64_t shifts_[kMaxCosets] = {};  // g^s
  std::vector<uint64_t> scale_[kMaxCosets];
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NTT_H_
