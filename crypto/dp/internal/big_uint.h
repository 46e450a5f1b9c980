// Fixed-width unsigned integer (384 bits) for the exact rational arithmetic
// of the discrete Gaussian sampler. Value type, no allocation, no exceptions.
// Overflow is reported through the `overflow` flag of the arithmetic helpers
// (callers bound their operands so that it never triggers on valid input).
// Internal to crypto/dp.
#ifndef TANDEM_CRYPTO_DP_INTERNAL_BIG_UINT_H_
#define TANDEM_CRYPTO_DP_INTERNAL_BIG_UINT_H_

#include <array>
#include <cstdint>

namespace tandem::dp::internal {

class BigUint {
 public:
  static constexpr int kLimbs = 6;  // 384 bits.

  constexpr BigUint() : limbs_{} {}
  constexpr explicit BigUint(uint64_t v) : limbs_{} { limbs_[0] = v; }
  static BigUint FromU128(unsigned __int128 v) {
    BigUint r;
    r.limbs_[0] = static_cast<uint64_t>(v);
    r.limbs_[1] = static_cast<uint64_t>(v >> 64);
    return r;
  }

  uint64_t limb(int i) const { return limbs_[i]; }
  void set_limb(int i, uint64_t v) { limbs_[i] = v; }

  bool IsZero() const {
    for (uint64_t l : limbs_) {
      if (l != 0) return false;
    }
    return true;
  }

  // Number of significant bits (0 for zero).
  int BitLength() const {
    for (int i = kLimbs - 1; i >= 0; --i) {
      if (limbs_[i] != 0) return 64 * i + (64 - __builtin_clzll(limbs_[i]));
    }
    return 0;
  }

  // Three-way comparison: -1, 0, 1.
  static int Compare(const BigUint& a, const BigUint& b) {
    for (int i = kLimbs - 1; i >= 0; --i) {
      if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] < b.limbs_[i] ? -1 : 1;
    }
    return 0;
  }

  // a - b. REQUIRES: a >= b.
  static BigUint Sub(const BigUint& a, const BigUint& b) {
    BigUint r;
    uint64_t borrow = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const unsigned __int128 d = static_cast<unsigned __int128>(a.limbs_[i]) - b.limbs_[i] - borrow;
      r.limbs_[i] = static_cast<uint64_t>(d);
      borrow = static_cast<uint64_t>(d >> 64) & 1;
    }
    return r;
  }

  // a * b, truncated to 384 bits; sets *overflow when bits were lost.
  static BigUint Mul(const BigUint& a, const BigUint& b, bool* overflow) {
    std::array<uint64_t, 2 * kLimbs> wide{};
    for (int i = 0; i < kLimbs; ++i) {
      if (a.limbs_[i] == 0) continue;
      uint64_t carry = 0;
      for (int j = 0; j < kLimbs; ++j) {
        const unsigned __int128 p = static_cast<unsigned __int128>(a.limbs_[i]) * b.limbs_[j] +
                                    wide[i + j] + carry;
        wide[i + j] = static_cast<uint64_t>(p);
        carry = static_cast<uint64_t>(p >> 64);
      }
      wide[i + kLimbs] = carry;
    }
    BigUint r;
    for (int i = 0; i < kLimbs; ++i) r.limbs_[i] = wide[i];
    for (int i = kLimbs; i < 2 * kLimbs; ++i) {
      if (wide[i] != 0) *overflow = true;
    }
    return r;
  }

  friend bool operator==(const BigUint& a, const BigUint& b) { return Compare(a, b) == 0; }
  friend bool operator<(const BigUint& a, const BigUint& b) { return Compare(a, b) < 0; }

 private:
  std::array<uint64_t, kLimbs> limbs_;
};

}  // namespace tandem::dp::internal

#endif  // TANDEM_CRYPTO_DP_INTERNAL_BIG_UINT_H_
