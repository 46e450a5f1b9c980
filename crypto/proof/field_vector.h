// Vector helpers over F_p, p = 2^64 - 2^32 + 1 (crypto/field/goldilocks.h),
// for the fully linear proofs of crypto/proof/flp.h: signed embedding,
// lazily reduced dot products, batch inversion, and the XOF that samples
// uniform field elements.
//
// Design choice [I] (protocol v3, kept in v4): the proofs moved from F_(2^61-1) to this
// field because F_(2^61-1)^* has 2-adic order 1 (p - 1 = 2 * 3^2 * 5^2 * 7 *
// 11 * 13 * 31 * 41 * 61 * 151 * 331 * 1321), so the prover had to extend
// each wire polynomial by O(N^2) Lagrange rows; here p - 1 = 2^32 * 3 * 5 *
// 17 * 257 * 65537 and power-of-two NTTs (crypto/proof/ntt.h) do it in
// O(N log N). The same modulus is Prio3's Field64 (CFRG VDAF draft).
//
// Constant time: every loop bound and branch depends on public sizes or on
// public evaluation points only; field arithmetic is branch-free.
// All functions are pure and thread-safe.
#ifndef TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_
#define TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "crypto/field/goldilocks.h"

namespace tandem::crypto::proof {

namespace gl = ::tandem::crypto::field::goldilocks;

// The F_p element of a signed integer (|x| < 2^63 < p), branch-free.
inline uint64_t FromSigned(int64_t x) {
  const uint64_t mask = static_cast<uint64_t>(x >> 63);  // all ones when x < 0
  const uint64_t magnitude = (static_cast<uint64_t>(x) ^ mask) - mask;  // <= 2^63 < p
  return (gl::Neg(magnitude) & mask) | (magnitude & ~mask);
}

// Sum of products of canonical elements with lazy reduction: each product
// is below p^2 < 2^128, added to a 128-bit accumulator whose carries out
// of bit 128 are counted; Get() folds count * 2^128 + acc mod p once
// (2^128 = -2^32 mod p). At most 2^64 - 1 terms. Not thread-safe.
class DotAccumulator {
 public:
  void Add(uint64_t a, uint64_t b) {
    const unsigned __int128 prod = static_cast<unsigned __int128>(a) * b;
    acc_ += prod;
    carries_ += static_cast<uint64_t>(acc_ < prod);
  }
  uint64_t Get() const { return Fold(acc_, carries_); }
  // carries 2^128 + acc mod p.
  static uint64_t Fold(unsigned __int128 acc, uint64_t carries) {
    const uint64_t low =
        gl::Reduce128(static_cast<uint64_t>(acc >> 64), static_cast<uint64_t>(acc));
    // 2^128 = (2^64)^2 = (2^32 - 1)^2 = 2^64 - 2^33 + 1 = -2^32 (mod p).
    const uint64_t high = gl::Mul(gl::Reduce64(carries), gl::kP - (uint64_t{1} << 32));
    return gl::Add(low, high);
  }

 private:
  unsigned __int128 acc_ = 0;
  uint64_t carries_ = 0;
};

// out[i] = 1 / in[i] (Montgomery's batch trick, one field inversion).
// REQUIRES: every in[i] != 0 and out.size() == in.size().
void BatchInverse(absl::Span<const uint64_t> in, absl::Span<uint64_t> out);

// Rejection sampling: copies the words below p (and, with `nonzero`, above
// 0), in order, to the front of `out` until it is full; returns how many
// were copied (<= out.size()). Elements of `out` past the returned count
// are unspecified.
size_t TakeFieldWords(absl::Span<const uint64_t> words, absl::Span<uint64_t> out,
                      bool nonzero = false);

// XOF to field elements: the stream of 64-bit words w_0, w_1, .. (block t
// = MMO_k(s ^ t) with the fixed-key MMO hash of crypto/aes, key from
// "tandem.proof.xof.v4", gives the low then the high 64 bits of its 128-bit
// value), s = first 16 bytes of HashParts({label, seed}); out is the
// sequence of words below p (rejection sampling, as the VDAF draft's
// XofFixedKeyAes128 and Field64 next_vec: hash to a seed, then fixed-key
// AES in counter mode, then reject words >= p). Each output is exactly
// uniform given a random oracle. A word is rejected with probability
// (2^32 - 1) / 2^64 < 2^-32; only the number of blocks computed (not the
// accepted values) depends on rejections. `nonzero`: 0 is rejected too,
// so each output is exactly uniform on F_p^* (weights that are inverted).
// The output for a length is a prefix of the output for any longer one
// (NormProofCore::Decide expands only the first weights of a stream).
// INTERNAL on OpenSSL failure.
absl::Status ExpandField(absl::Span<const uint8_t> seed, absl::string_view label,
                         absl::Span<uint64_t> out, bool nonzero = false);

// SHA-256 of the concatenation of `parts`, each prefixed with its 8-byte
// little-endian length (an injective encoding). INTERNAL on OpenSSL failure.
absl::StatusOr<std::vector<uint8_t>> HashParts(std::initializer_list<absl::string_view> parts);

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_FIELD_VECTOR_H_
