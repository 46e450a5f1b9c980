// The prime field F_p, p = 2^64 - 2^32 + 1 ("Goldilocks"; the modulus of
// Field64 in the CFRG VDAF draft, draft-irtf-cfrg-vdaf, Section 6.1), for
// the norm-bound proofs (crypto/proof). p - 1 = 2^32 * 3 * 5 * 17 * 257 *
// 65537, so F_p^* has a subgroup of every order 2^k, k <= 32 (NTTs), and 7
// generates F_p^*.
//
// Reduction uses 2^64 = 2^32 - 1 and 2^96 = -1 (mod p): for x = hi 2^64 +
// lo with hi = hh 2^32 + hl, x = lo - hh + hl (2^32 - 1) (mod p). Every
// step is branch-free (carries and borrows become masks), so the time of an
// operation does not depend on its operands. Elements are uint64_t in
// [0, p) ("canonical"); every function REQUIRES canonical inputs unless it
// says otherwise and returns a canonical result.
//
// crypto/field/mersenne61.h stays the field of crypto/dpf/field_dpf.
#ifndef TANDEM_CRYPTO_FIELD_GOLDILOCKS_H_
#define TANDEM_CRYPTO_FIELD_GOLDILOCKS_H_

#include <cstdint>

namespace tandem::crypto::field::goldilocks {

inline constexpr uint64_t kP = 0xffffffff00000001ULL;  // 2^64 - 2^32 + 1
inline constexpr uint64_t kEpsilon = 0xffffffffULL;    // 2^64 mod p = 2^32 - 1
inline constexpr uint64_t kGenerator = 7;              // generates F_p^*
inline constexpr int kTwoAdicity = 32;                 // 2^32 | p - 1

// All ones when `bit` (0 or 1) is set, else zero.
constexpr uint64_t Mask(uint64_t bit) { return 0 - bit; }

// Any 64-bit x to [0, p): one conditional subtraction (x < 2^64 < 2p).
constexpr uint64_t Reduce64(uint64_t x) { return x - (kP & Mask(x >= kP)); }

// x mod p for the 128-bit x = hi 2^64 + lo (any hi, lo).
constexpr uint64_t Reduce128(uint64_t hi, uint64_t lo) {
  const uint64_t hh = hi >> 32, hl = hi & kEpsilon;
  // lo - hh; a borrow wrapped by +2^64 = +(2^32 - 1), taken back. No second
  // borrow: after one, lo - hh + 2^64 >= 2^64 - 2^32 > 2^32 - 1.
  uint64_t t0 = lo - hh;
  t0 -= kEpsilon & Mask(lo < hh);
  // + hl (2^32 - 1) < 2^64; a carry dropped 2^64 = 2^32 - 1, added back
  // (no second carry: t0 + t1 - 2^64 < 2^64 - 2^33 + 1).
  const uint64_t t1 = hl * kEpsilon;
  const uint64_t t2 = t0 + t1;
  return Reduce64(t2 + (kEpsilon & Mask(t2 < t1)));
}

constexpr uint64_t Add(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;  // a carry means a + b - 2^64 < 2^64 - 2^33 + 2
  return Reduce64(s + (kEpsilon & Mask(s < a)));
}
constexpr uint64_t Sub(uint64_t a, uint64_t b) {
  // A borrow means a < b: a - b + 2^64 - (2^32 - 1) = a - b + p < p.
  const uint64_t d = a - b;
  return d - (kEpsilon & Mask(a < b));
}
constexpr uint64_t Neg(uint64_t a) { return Sub(0, a); }
constexpr uint64_t Mul(uint64_t a, uint64_t b) {
  const unsigned __int128 x = static_cast<unsigned __int128>(a) * b;
  return Reduce128(static_cast<uint64_t>(x >> 64), static_cast<uint64_t>(x));
}
// a^e by square-and-multiply over the public exponent e.
constexpr uint64_t Pow(uint64_t a, uint64_t e) {
  uint64_t result = 1, base = a;
  for (; e != 0; e >>= 1) {
    if (e & 1) result = Mul(result, base);
    base = Mul(base, base);
  }
  return result;
}
// a^(p-2) = a^-1 for a != 0 (0 maps to 0).
constexpr uint64_t Inverse(uint64_t a) { return Pow(a, kP - 2); }
// A primitive 2^log_order-th root of unity, 0 <= log_order <= 32:
// 7^((p-1) / 2^log_order).
constexpr uint64_t RootOfUnity(int log_order) { return Pow(kGenerator, (kP - 1) >> log_order); }

}  // namespace tandem::crypto::field::goldilocks

#endif  // TANDEM_CRYPTO_FIELD_GOLDILOCKS_H_
