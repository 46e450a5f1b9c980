// edwards25519 field and group arithmetic shared by verification
// (edwards25519.cc, variable time) and signing (edwards25519_sign.cc,
// constant time): every function here runs in time independent of the
// values of its operands (no branches or table indices on them), except
// Equal and IsZero (array comparisons that stop at the first difference) and
// AddCached's `negate` branch; the constant-time code uses none of them on
// secrets.
//
// Internal to crypto/sign; see edwards25519.h for the design notes.
#ifndef TANDEM_CRYPTO_SIGN_EDWARDS25519_ARITH_H_
#define TANDEM_CRYPTO_SIGN_EDWARDS25519_ARITH_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::crypto::internal::ed25519 {

using u64 = uint64_t;
using u128 = unsigned __int128;

using u64 = uint64_t;
using u128 = unsigned __int128;

// ---------------------------------------------------------------------------
// GF(p), p = 2^255 - 19, five 51-bit limbs. Bounds: Mul/Sq/Carry/Sub outputs
// have limbs < 2^51 + 2^18 ("carried"); Add does not carry, so Add's inputs
// are carried and its output (< 2^53) may feed Mul/Sq or be Sub's subtrahend,
// whose 4p bias needs limbs below 2^53 - 76.

constexpr u64 kMask51 = (u64{1} << 51) - 1;

struct Fe {
  u64 v[5];
};

constexpr Fe kZero{{0, 0, 0, 0, 0}};
constexpr Fe kOne{{1, 0, 0, 0, 0}};
// d = -121665/121666, 2d and sqrt(-1) = 2^((p-1)/4) (RFC 8032 section 5.1).
constexpr Fe kD{
    {0x34dca135978a3, 0x1a8283b156ebd, 0x5e7a26001c029, 0x739c663a03cbb, 0x52036cee2b6ff}};
constexpr Fe kD2{
    {0x69b9426b2f159, 0x35050762add7a, 0x3cf44c0038052, 0x6738cc7407977, 0x2406d9dc56dff}};
constexpr Fe kSqrtM1{
    {0x61b274a0ea0b0, 0xd5a5fc8f189d, 0x7ef5e9cbd0c60, 0x78595a6804c9e, 0x2b8324804fc1d}};

// Written out limb by limb: the same chain as a 4-step loop made GCC 12's
// verification 18 % slower (BM_Ed25519VerifyRaw 33.8 against 28.7 us).
inline Fe Carry(Fe a) {
  u64 c = a.v[0] >> 51;
  a.v[0] &= kMask51;
  a.v[1] += c;
  c = a.v[1] >> 51;
  a.v[1] &= kMask51;
  a.v[2] += c;
  c = a.v[2] >> 51;
  a.v[2] &= kMask51;
  a.v[3] += c;
  c = a.v[3] >> 51;
  a.v[3] &= kMask51;
  a.v[4] += c;
  c = a.v[4] >> 51;
  a.v[4] &= kMask51;
  a.v[0] += 19 * c;
  return a;
}

inline Fe Add(const Fe& a, const Fe& b) {
  return Fe{{a.v[0] + b.v[0], a.v[1] + b.v[1], a.v[2] + b.v[2], a.v[3] + b.v[3], a.v[4] + b.v[4]}};
}

// a - b + 4p, carried.
inline Fe Sub(const Fe& a, const Fe& b) {
  constexpr u64 k4p0 = 0x1FFFFFFFFFFFB4;  // 4 (2^51 - 19)
  constexpr u64 k4pi = 0x1FFFFFFFFFFFFC;  // 4 (2^51 - 1)
  return Carry(Fe{{a.v[0] + k4p0 - b.v[0], a.v[1] + k4pi - b.v[1], a.v[2] + k4pi - b.v[2],
                   a.v[3] + k4pi - b.v[3], a.v[4] + k4pi - b.v[4]}});
}

inline Fe Neg(const Fe& a) { return Sub(kZero, a); }

// Reduces five 128-bit column sums (each < 2^116) to a carried element.
inline Fe CarryWide(u128 r0, u128 r1, u128 r2, u128 r3, u128 r4) {
  r1 += static_cast<u64>(r0 >> 51);
  r2 += static_cast<u64>(r1 >> 51);
  r3 += static_cast<u64>(r2 >> 51);
  r4 += static_cast<u64>(r3 >> 51);
  Fe h{{static_cast<u64>(r0) & kMask51, static_cast<u64>(r1) & kMask51,
        static_cast<u64>(r2) & kMask51, static_cast<u64>(r3) & kMask51,
        static_cast<u64>(r4) & kMask51}};
  h.v[0] += 19 * static_cast<u64>(r4 >> 51);
  h.v[1] += h.v[0] >> 51;
  h.v[0] &= kMask51;
  return h;
}

// Schoolbook product; 2^255 = 19 folds the high columns.
inline Fe Mul(const Fe& a, const Fe& b) {
  const u64 b1 = 19 * b.v[1], b2 = 19 * b.v[2], b3 = 19 * b.v[3], b4 = 19 * b.v[4];
  auto m = [](u64 x, u64 y) { return static_cast<u128>(x) * y; };
  return CarryWide(
      m(a.v[0], b.v[0]) + m(a.v[1], b4) + m(a.v[2], b3) + m(a.v[3], b2) + m(a.v[4], b1),
      m(a.v[0], b.v[1]) + m(a.v[1], b.v[0]) + m(a.v[2], b4) + m(a.v[3], b3) + m(a.v[4], b2),
      m(a.v[0], b.v[2]) + m(a.v[1], b.v[1]) + m(a.v[2], b.v[0]) + m(a.v[3], b4) + m(a.v[4], b3),
      m(a.v[0], b.v[3]) + m(a.v[1], b.v[2]) + m(a.v[2], b.v[1]) + m(a.v[3], b.v[0]) + m(a.v[4], b4),
      m(a.v[0], b.v[4]) + m(a.v[1], b.v[3]) + m(a.v[2], b.v[2]) + m(a.v[3], b.v[1]) +
          m(a.v[4], b.v[0]));
}

inline Fe Sq(const Fe& a) {
  const u64 d0 = 2 * a.v[0], d1 = 2 * a.v[1], d2 = 2 * a.v[2], d3 = 2 * a.v[3];
  const u64 a3 = 19 * a.v[3], a4 = 19 * a.v[4];
  auto m = [](u64 x, u64 y) { return static_cast<u128>(x) * y; };
  return CarryWide(
      m(a.v[0], a.v[0]) + m(d1, a4) + m(d2, a3), m(d0, a.v[1]) + m(d2, a4) + m(a.v[3], a3),
      m(d0, a.v[2]) + m(a.v[1], a.v[1]) + m(d3, a4), m(d0, a.v[3]) + m(d1, a.v[2]) + m(a.v[4], a4),
      m(d0, a.v[4]) + m(d1, a.v[3]) + m(a.v[2], a.v[2]));
}

inline Fe SqN(Fe a, int n) {
  for (int i = 0; i < n; ++i) a = Sq(a);
  return a;
}

// Returns {z^(2^250 - 1), z^11}, the common prefix of inversion and of the
// square root's exponent.
inline std::array<Fe, 2> Pow250(const Fe& z) {
  const Fe z2 = Sq(z);
  const Fe z9 = Mul(SqN(z2, 2), z);
  const Fe z11 = Mul(z9, z2);
  const Fe z5 = Mul(Sq(z11), z9);             // 2^5 - 1
  const Fe z10 = Mul(SqN(z5, 5), z5);         // 2^10 - 1
  const Fe z20 = Mul(SqN(z10, 10), z10);      // 2^20 - 1
  const Fe z40 = Mul(SqN(z20, 20), z20);      // 2^40 - 1
  const Fe z50 = Mul(SqN(z40, 10), z10);      // 2^50 - 1
  const Fe z100 = Mul(SqN(z50, 50), z50);     // 2^100 - 1
  const Fe z200 = Mul(SqN(z100, 100), z100);  // 2^200 - 1
  return {Mul(SqN(z200, 50), z50), z11};      // 2^250 - 1
}

// z^(p - 2) = z^((2^250 - 1) 2^5 + 11).
inline Fe Invert(const Fe& z) {
  const std::array<Fe, 2> t = Pow250(z);
  return Mul(SqN(t[0], 5), t[1]);
}

// z^((p - 5) / 8) = z^((2^250 - 1) 4 + 1).
inline Fe Pow22523(const Fe& z) { return Mul(SqN(Pow250(z)[0], 2), z); }

// The low 255 bits of `s` (bit 255 is the caller's).
inline Fe FromBytes(const uint8_t* s) {
  u64 w[4];
  std::memcpy(w, s, 32);  // little-endian host (x86-64, AArch64)
  return Fe{{w[0] & kMask51, ((w[0] >> 51) | (w[1] << 13)) & kMask51,
             ((w[1] >> 38) | (w[2] << 26)) & kMask51, ((w[2] >> 25) | (w[3] << 39)) & kMask51,
             (w[3] >> 12) & kMask51}};
}

// The canonical (fully reduced) 32-byte encoding.
inline std::array<uint8_t, 32> ToBytes(const Fe& a) {
  Fe h = Carry(Carry(a));       // value < 2p, limb 0 < 2^51 + 19, the others < 2^51
  u64 q = (h.v[0] + 19) >> 51;  // q = 1 iff h >= p
  q = (h.v[1] + q) >> 51;
  q = (h.v[2] + q) >> 51;
  q = (h.v[3] + q) >> 51;
  q = (h.v[4] + q) >> 51;
  h.v[0] += 19 * q;
  for (int i = 0; i < 4; ++i) {
    h.v[i + 1] += h.v[i] >> 51;
    h.v[i] &= kMask51;
  }
  h.v[4] &= kMask51;
  const u64 w[4] = {h.v[0] | (h.v[1] << 51), (h.v[1] >> 13) | (h.v[2] << 38),
                    (h.v[2] >> 26) | (h.v[3] << 25), (h.v[3] >> 39) | (h.v[4] << 12)};
  std::array<uint8_t, 32> out;
  std::memcpy(out.data(), w, 32);
  return out;
}

inline bool Equal(const Fe& a, const Fe& b) { return ToBytes(a) == ToBytes(b); }
inline bool IsZero(const Fe& a) { return ToBytes(a) == std::array<uint8_t, 32>{}; }
inline bool IsNegative(const Fe& a) { return (ToBytes(a)[0] & 1) != 0; }

// ---------------------------------------------------------------------------
// Points of -x^2 + y^2 = 1 + d x^2 y^2 (HWCD 2008, extended coordinates):
// P2 (X:Y:Z), P3 (X:Y:Z:T) with XY = ZT, P1P1 the "completed" result of a
// doubling or addition (x = X/T, y = Y/Z in this file's naming: the pair
// E, H, G, F of the formulas), Cached (Y+X, Y-X, Z, 2dT) for additions.

struct P2 {
  Fe x, y, z;
};
struct P3 {
  Fe x, y, z, t;
};
struct P1P1 {
  Fe e, h, g, f;  // X3 = E F, Y3 = G H, Z3 = F G, T3 = E H
};
struct Cached {
  Fe ypx, ymx, z, t2d;
};

inline P2 ToP2(const P1P1& r) { return P2{Mul(r.e, r.f), Mul(r.g, r.h), Mul(r.f, r.g)}; }
inline P3 ToP3(const P1P1& r) {
  return P3{Mul(r.e, r.f), Mul(r.g, r.h), Mul(r.f, r.g), Mul(r.e, r.h)};
}
inline P2 ToP2(const P3& p) { return P2{p.x, p.y, p.z}; }
inline Cached ToCached(const P3& p) {
  return Cached{Add(p.y, p.x), Sub(p.y, p.x), p.z, Mul(p.t, kD2)};
}

// dbl-2008-hwcd with a = -1: A = X^2, B = Y^2, C = 2 Z^2, E = (X+Y)^2 - A - B,
// G = B - A, F = G - C, H = -A - B.
inline P1P1 Dbl(const P2& p) {
  const Fe a = Sq(p.x), b = Sq(p.y), zz = Sq(p.z);
  const Fe ab = Add(a, b);
  const Fe g = Sub(b, a);
  return P1P1{Sub(Sq(Add(p.x, p.y)), ab), Neg(ab), g, Sub(g, Add(zz, zz))};
}

// add-2008-hwcd-3 with a = -1, k = 2d (complete on edwards25519):
// A = (Y1-X1)(Y2-X2), B = (Y1+X1)(Y2+X2), C = T1 2d T2, D = 2 Z1 Z2,
// E = B - A, F = D - C, G = D + C, H = B + A. `negate` adds -q instead
// (q's Y+X and Y-X swap, its T changes sign).
inline P1P1 AddCached(const P3& p, const Cached& q, bool negate) {
  const Fe a = Mul(Sub(p.y, p.x), negate ? q.ypx : q.ymx);
  const Fe b = Mul(Add(p.y, p.x), negate ? q.ymx : q.ypx);
  const Fe c = Mul(p.t, q.t2d);
  const Fe zz = Mul(p.z, q.z);
  const Fe d = Add(zz, zz);
  return negate ? P1P1{Sub(b, a), Add(b, a), Sub(d, c), Add(d, c)}
                : P1P1{Sub(b, a), Add(b, a), Add(d, c), Sub(d, c)};
}

// acc += a b over little-endian 64-bit limbs (na, nb, n of them), kept
// modulo 2^(64 n): carries out of acc's top limb are dropped. The loop
// counts depend on the sizes only (constant time): Barrett's products and
// the signer's S = r + k s.
inline void MulAddLimbs(const u64* a, int na, const u64* b, int nb, u64* acc, int n) {
  for (int i = 0; i < na; ++i) {
    u64 carry = 0;
    for (int j = 0; j < nb && i + j < n; ++j) {
      const u128 t = static_cast<u128>(a[i]) * b[j] + acc[i + j] + carry;
      acc[i + j] = static_cast<u64>(t);
      carry = static_cast<u64>(t >> 64);
    }
    for (int k = i + nb; k < n; ++k) {  // empty when row i reached the top
      const u128 t = static_cast<u128>(acc[k]) + carry;
      acc[k] = static_cast<u64>(t);
      carry = static_cast<u64>(t >> 64);
    }
  }
}

// The base point B of RFC 8032 section 5.1 (decoded on each call).
P3 BasePoint();

// SHA-512 of the concatenated parts into `out` (a thread-local OpenSSL
// context). INTERNAL only if OpenSSL fails.
absl::Status Sha512(std::initializer_list<absl::string_view> parts, uint8_t out[64]);

}  // namespace tandem::crypto::internal::ed25519

#endif  // TANDEM_CRYPTO_SIGN_EDWARDS25519_ARITH_H_
