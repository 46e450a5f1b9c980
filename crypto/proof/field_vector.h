// Vector and polynomial helpers over F_p, p = 2^61 - 1 (crypto/field/
// mersenne61.h), for the fully linear proofs of crypto/proof/flp.h.
//
// Polynomials are kept by their values on consecutive integers {0, ..., n-1}
// and evaluated elsewhere with the barycentric Lagrange formula. Design
// choice [I]: F_p^* has 2-adic order 1 (p - 1 = 2 * 3^2 * 5^2 * 7 * 11 * 13 *
// 31 * 41 * 61 * 151 * 331 * 1321), so there is no power-of-two NTT; mixed-
// radix subgroups exist but only for orders that are products of those
// factors. The proofs here are O(sqrt(n)) long, so O(length^2) Lagrange work
// on an arithmetic progression is cheap, needs no special domain sizes, and
// the domain {0..n-1} makes "evaluate at a domain point" a plain read.
//
// Constant time: every loop bound and branch depends on public sizes or on
// public evaluation points only; field arithmetic is branch-free.
// All functions are pure and thread-safe; LagrangeDomain is immutable.
#ifndef TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_
#define TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "crypto/field/mersenne61.h"

namespace tandem::crypto::proof {

using field::kP61;

// The F_p element of a signed integer (|x| < 2^63), branch-free.
inline uint64_t FromSigned(int64_t x) {
  const uint64_t mask = static_cast<uint64_t>(x >> 63);  // all ones when x < 0
  const uint64_t magnitude = (static_cast<uint64_t>(x) ^ mask) - mask;
  const uint64_t r = field::Reduce64(magnitude);
  return (field::Neg(r) & mask) | (r & ~mask);
}

// Reduced-input arithmetic for the hot loops: REQUIRES a, b < p (canonical
// elements), returns the canonical result like field::Add/Sub/Mul but with
// one conditional subtraction instead of a general fold. Branch-free.
inline uint64_t CondSubP(uint64_t x) {  // x < 2p
  return x - (kP61 & (0 - static_cast<uint64_t>(x >= kP61)));
}
inline uint64_t AddR(uint64_t a, uint64_t b) { return CondSubP(a + b); }
inline uint64_t SubR(uint64_t a, uint64_t b) { return CondSubP(a + (kP61 - b)); }
inline uint64_t MulR(uint64_t a, uint64_t b) {
  // a b < (p-1)^2, so x mod 2^61 + floor(x / 2^61) <= 2p - 2.
  const unsigned __int128 x = static_cast<unsigned __int128>(a) * b;
  return CondSubP((static_cast<uint64_t>(x) & kP61) + static_cast<uint64_t>(x >> 61));
}
// a * 2^s mod p for a < p, 0 <= s < 61: a rotation of the 61-bit word.
inline uint64_t MulPow2R(uint64_t a, int s) {
  return s == 0 ? a : ((a << s) & kP61) | (a >> (61 - s));
}

// Sum of products with lazy reduction: products (< 2^122) are added in 128
// bits and folded every 32 terms. Not thread-safe (a local accumulator).
class DotAccumulator {
 public:
  void Add(uint64_t a, uint64_t b) {
    acc_ += static_cast<unsigned __int128>(a) * b;
    if (++pending_ == 32) Fold();
  }
  uint64_t Get() {
    Fold();
    return static_cast<uint64_t>(acc_);
  }

 private:
  void Fold() {
    acc_ = field::Reduce128(static_cast<uint64_t>(acc_ >> 64), static_cast<uint64_t>(acc_));
    pending_ = 0;
  }
  unsigned __int128 acc_ = 0;
  int pending_ = 0;
};

// out[i] = 1 / in[i] (Montgomery's batch trick, one field inversion).
// REQUIRES: every in[i] != 0 and out.size() == in.size().
void BatchInverse(absl::Span<const uint64_t> in, absl::Span<uint64_t> out);

// Lagrange basis of the points {0, 1, ..., n-1}.
class LagrangeDomain {
 public:
  // INVALID_ARGUMENT unless 1 <= n <= 2^22.
  static absl::StatusOr<LagrangeDomain> Create(size_t n);

  size_t size() const { return weights_.size(); }
  // out[i] = L_i(x), so f(x) = sum_i out[i] * f(i) for every polynomial f of
  // degree < n. For x in the domain this is the unit vector e_x.
  // REQUIRES: x < p and out.size() == size().
  void Coefficients(uint64_t x, absl::Span<uint64_t> out) const;
  // f(x) from values[i] = f(i). REQUIRES values.size() == size(), x < p.
  uint64_t Evaluate(absl::Span<const uint64_t> values, uint64_t x) const;

 private:
  explicit LagrangeDomain(std::vector<uint64_t> weights) : weights_(std::move(weights)) {}
  // Barycentric weights w_i = 1 / prod_{j != i} (i - j).
  std::vector<uint64_t> weights_;
};

// XOF to field elements: out[i] = (MMO_k(s ^ i) as a 128-bit integer) mod p
// with the fixed-key MMO hash of crypto/aes (key from "tandem.proof.xof.v1")
// and s = first 16 bytes of SHA-256(label || 0x00 || seed), the shape of
// XofFixedKeyAes128 in the CFRG VDAF draft (hash to a seed, then fixed-key
// AES in counter mode). Each output is within 2^-66 of uniform.
// INTERNAL on OpenSSL failure.
absl::Status ExpandField(absl::Span<const uint8_t> seed, absl::string_view label,
                         absl::Span<uint64_t> out);

// SHA-256 of the concatenation of `parts`, each prefixed with its 8-byte
// little-endian length (an injective encoding). INTERNAL on OpenSSL failure.
absl::StatusOr<std::vector<uint8_t>> HashParts(std::initializer_list<absl::string_view> parts);

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_
