// The prime field F_p, p = 2^61 - 1 (a Mersenne prime), for checks on
// secret-shared data. Reduction uses 2^61 = 1 (mod p): no division, no
// branches on values (constant time; the final conditional subtraction is a
// mask). Elements are uint64_t in [0, p).
#ifndef TANDEM_CRYPTO_FIELD_MERSENNE61_H_
#define TANDEM_CRYPTO_FIELD_MERSENNE61_H_

#include <cstdint>

namespace tandem::crypto::field {

inline constexpr uint64_t kP61 = (uint64_t{1} << 61) - 1;

// Maps x < 2^62 (or any x < 2^64 after one fold) into [0, p).
constexpr uint64_t Reduce64(uint64_t x) {
  x = (x & kP61) + (x >> 61);  // < 2^61 + 8
  const uint64_t ge = 0 - static_cast<uint64_t>(x >= kP61);  // compiles to a setcc/mask
  return x - (kP61 & ge);
}

// x mod p for a 128-bit x = hi * 2^64 + lo (2^64 = 8 mod p).
constexpr uint64_t Reduce128(uint64_t hi, uint64_t lo) {
  const unsigned __int128 x = (static_cast<unsigned __int128>(hi) << 64) | lo;
  const unsigned __int128 folded = (x & kP61) + (x >> 61);  // < 2^68
  return Reduce64(static_cast<uint64_t>(folded & kP61) + static_cast<uint64_t>(folded >> 61));
}

constexpr uint64_t Add(uint64_t a, uint64_t b) { return Reduce64(a + b); }
constexpr uint64_t Neg(uint64_t a) { return Reduce64(kP61 - a); }
constexpr uint64_t Sub(uint64_t a, uint64_t b) { return Add(a, Neg(b)); }
constexpr uint64_t Mul(uint64_t a, uint64_t b) {
  const unsigned __int128 x = static_cast<unsigned __int128>(a) * b;
  return Reduce128(static_cast<uint64_t>(x >> 64), static_cast<uint64_t>(x));
}
// a^(p-2) = a^-1 for a != 0 (0 maps to 0). Square-and-multiply over the
// public exponent only.
constexpr uint64_t Inverse(uint64_t a) {
  uint64_t result = 1, base = a;
  for (uint64_t e = kP61 - 2; e != 0; e >>= 1) {
    if (e & 1) result = Mul(result, base);
    base = Mul(base, base);
  }
  return result;
}

}  // namespace tandem::crypto::field

#endif  // TANDEM_CRYPTO_FIELD_MERSENNE61_H_
