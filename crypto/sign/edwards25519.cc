#include "crypto/sign/edwards25519.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::crypto::internal {
namespace {

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
std::array<Fe, 2> Pow250(const Fe& z) {
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
Fe Invert(const Fe& z) {
  const std::array<Fe, 2> t = Pow250(z);
  return Mul(SqN(t[0], 5), t[1]);
}

// z^((p - 5) / 8) = z^((2^250 - 1) 4 + 1).
Fe Pow22523(const Fe& z) { return Mul(SqN(Pow250(z)[0], 2), z); }

// The low 255 bits of `s` (bit 255 is the caller's).
Fe FromBytes(const uint8_t* s) {
  u64 w[4];
  std::memcpy(w, s, 32);  // little-endian host (x86-64, AArch64)
  return Fe{{w[0] & kMask51, ((w[0] >> 51) | (w[1] << 13)) & kMask51,
             ((w[1] >> 38) | (w[2] << 26)) & kMask51, ((w[2] >> 25) | (w[3] << 39)) & kMask51,
             (w[3] >> 12) & kMask51}};
}

// The canonical (fully reduced) 32-byte encoding.
std::array<uint8_t, 32> ToBytes(const Fe& a) {
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

bool Equal(const Fe& a, const Fe& b) { return ToBytes(a) == ToBytes(b); }
bool IsZero(const Fe& a) { return ToBytes(a) == std::array<uint8_t, 32>{}; }
bool IsNegative(const Fe& a) { return (ToBytes(a)[0] & 1) != 0; }

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

P2 ToP2(const P1P1& r) { return P2{Mul(r.e, r.f), Mul(r.g, r.h), Mul(r.f, r.g)}; }
P3 ToP3(const P1P1& r) { return P3{Mul(r.e, r.f), Mul(r.g, r.h), Mul(r.f, r.g), Mul(r.e, r.h)}; }
P2 ToP2(const P3& p) { return P2{p.x, p.y, p.z}; }
Cached ToCached(const P3& p) { return Cached{Add(p.y, p.x), Sub(p.y, p.x), p.z, Mul(p.t, kD2)}; }

// dbl-2008-hwcd with a = -1: A = X^2, B = Y^2, C = 2 Z^2, E = (X+Y)^2 - A - B,
// G = B - A, F = G - C, H = -A - B.
P1P1 Dbl(const P2& p) {
  const Fe a = Sq(p.x), b = Sq(p.y), zz = Sq(p.z);
  const Fe ab = Add(a, b);
  const Fe g = Sub(b, a);
  return P1P1{Sub(Sq(Add(p.x, p.y)), ab), Neg(ab), g, Sub(g, Add(zz, zz))};
}

// add-2008-hwcd-3 with a = -1, k = 2d (complete on edwards25519):
// A = (Y1-X1)(Y2-X2), B = (Y1+X1)(Y2+X2), C = T1 2d T2, D = 2 Z1 Z2,
// E = B - A, F = D - C, G = D + C, H = B + A. `negate` adds -q instead
// (q's Y+X and Y-X swap, its T changes sign).
P1P1 AddCached(const P3& p, const Cached& q, bool negate) {
  const Fe a = Mul(Sub(p.y, p.x), negate ? q.ypx : q.ymx);
  const Fe b = Mul(Add(p.y, p.x), negate ? q.ymx : q.ypx);
  const Fe c = Mul(p.t, q.t2d);
  const Fe zz = Mul(p.z, q.z);
  const Fe d = Add(zz, zz);
  return negate ? P1P1{Sub(b, a), Add(b, a), Sub(d, c), Add(d, c)}
                : P1P1{Sub(b, a), Add(b, a), Add(d, c), Sub(d, c)};
}

// Odd multiples P, 3P, ..., (2n-1)P.
template <size_t N>
std::array<Cached, N> OddMultiples(const P3& p) {
  std::array<Cached, N> out;
  out[0] = ToCached(p);
  const P3 p2 = ToP3(Dbl(ToP2(p)));
  for (size_t i = 1; i < N; ++i) out[i] = ToCached(ToP3(AddCached(p2, out[i - 1], false)));
  return out;
}

// RFC 8032 5.1.3. Fails with the reason; does not check the order.
absl::StatusOr<P3> Decode(const uint8_t* s) {
  const Fe y = FromBytes(s);
  std::array<uint8_t, 32> canonical = ToBytes(y);
  canonical[31] |= s[31] & 0x80;
  if (std::memcmp(canonical.data(), s, 32) != 0) {
    return absl::InvalidArgumentError("Ed25519 public key is not canonical (y >= p)");
  }
  // x^2 = u / v with u = y^2 - 1, v = d y^2 + 1; candidate x = u v^3 (u v^7)^((p-5)/8).
  const Fe y2 = Sq(y);
  const Fe u = Sub(y2, kOne);
  const Fe v = Add(Mul(y2, kD), kOne);
  const Fe v3 = Mul(Sq(v), v);
  Fe x = Mul(Mul(v3, u), Pow22523(Mul(Mul(Sq(v3), v), u)));
  const Fe vx2 = Mul(v, Sq(x));
  if (!Equal(vx2, u)) {
    if (!Equal(vx2, Neg(u))) {
      return absl::InvalidArgumentError("Ed25519 public key is not a point of the curve");
    }
    x = Mul(x, kSqrtM1);
  }
  const bool sign = (s[31] & 0x80) != 0;
  if (IsZero(x) && sign) {
    return absl::InvalidArgumentError("Ed25519 public key: x = 0 with sign bit set");
  }
  if (IsNegative(x) != sign) x = Neg(x);
  return P3{x, y, kOne, Mul(x, y)};
}

// 255 to 253-bit scalars (little-endian 32 bytes) to width-w NAF: digits odd
// in (-2^(w-1), 2^(w-1)) or 0, any w consecutive holding at most one nonzero.
std::array<int8_t, 257> Naf(const uint8_t* s, int w) {
  u64 k[5] = {0, 0, 0, 0, 0};
  std::memcpy(k, s, 32);
  std::array<int8_t, 257> naf{};
  const int64_t window = int64_t{1} << w;
  for (int i = 0; (k[0] | k[1] | k[2] | k[3] | k[4]) != 0; ++i) {
    if (k[0] & 1) {
      int64_t digit = static_cast<int64_t>(k[0] & static_cast<u64>(window - 1));
      if (digit >= window / 2) digit -= window;
      naf[i] = static_cast<int8_t>(digit);
      if (digit > 0) {
        k[0] -= static_cast<u64>(digit);  // no borrow: these are k's low bits
      } else {
        u64 add = static_cast<u64>(-digit);
        for (u64& limb : k) {
          limb += add;
          add = limb < add ? 1 : 0;
          if (add == 0) break;
        }
      }
    }
    for (int j = 0; j < 4; ++j) k[j] = (k[j] >> 1) | (k[j + 1] << 63);
    k[4] >>= 1;
  }
  return naf;
}

// L = 2^252 + 27742317777372353535851937790883648493, little-endian limbs.
constexpr u64 kOrder[4] = {0x5812631a5cf5d3ed, 0x14def9dea2f79cd6, 0, 0x1000000000000000};
// mu = floor(2^512 / L), 260 bits, for Barrett reduction of x < 2^512:
// q = floor(floor(x / 2^252) mu / 2^260) satisfies floor(x / L) - 2 <= q
// <= floor(x / L), since x / 2^512 < 1 and 2^252 / L < 1 bound the two
// truncations, so 0 <= x - q L < 3L.
constexpr u64 kBarrettMu[5] = {0xed9ce5a30a2c131b, 0x2106215d086329a7, 0xffffffffffffffeb,
                               0xffffffffffffffff, 0xf};

bool LessThanOrder(const u64* r, int limbs) {
  for (int i = limbs - 1; i >= 4; --i) {
    if (r[i] != 0) return false;
  }
  for (int i = 3; i >= 0; --i) {
    if (r[i] != kOrder[i]) return r[i] < kOrder[i];
  }
  return false;
}

struct BaseTable {
  std::array<Cached, 64> odd;  // B, 3B, ..., 127B for the width-8 NAF of S
};

const BaseTable& Base() {
  static const BaseTable* const table = [] {
    // The base point's encoding: y = 4/5, x even (RFC 8032 section 5.1).
    uint8_t b[32];
    std::memset(b, 0x66, sizeof(b));
    b[0] = 0x58;
    auto* t = new BaseTable;
    t->odd = OddMultiples<64>(*Decode(b));
    return t;
  }();
  return *table;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

struct Ed25519PublicKeyTable {
  uint8_t raw[32];
  std::array<Cached, 8> neg_odd;  // -A, -3A, ..., -15A
};

std::array<uint8_t, 32> ReduceModOrder(const std::array<uint8_t, 64>& bytes) {
  u64 x[9] = {};
  std::memcpy(x, bytes.data(), 64);
  // q1 = x >> 252, q3 = (q1 mu) >> 260; then 0 <= x - q3 L < 3L.
  u64 q1[5];
  for (int i = 0; i < 5; ++i) q1[i] = (x[i + 3] >> 60) | (x[i + 4] << 4);
  u64 q2[10] = {};
  for (int i = 0; i < 5; ++i) {
    u64 carry = 0;
    for (int j = 0; j < 5; ++j) {
      const u128 t = static_cast<u128>(q1[i]) * kBarrettMu[j] + q2[i + j] + carry;
      q2[i + j] = static_cast<u64>(t);
      carry = static_cast<u64>(t >> 64);
    }
    q2[i + 5] = carry;
  }
  u64 q3[5];
  for (int i = 0; i < 5; ++i) q3[i] = (q2[i + 4] >> 4) | (q2[i + 5] << 60);
  // r = (x - q3 L) mod 2^320.
  u64 ql[5] = {};
  for (int i = 0; i < 5; ++i) {
    u64 carry = 0;
    for (int j = 0; i + j < 5 && j < 4; ++j) {
      const u128 t = static_cast<u128>(q3[i]) * kOrder[j] + ql[i + j] + carry;
      ql[i + j] = static_cast<u64>(t);
      carry = static_cast<u64>(t >> 64);
    }
    if (i + 4 < 5) ql[i + 4] += carry;
  }
  u64 r[5];
  u64 borrow = 0;
  for (int i = 0; i < 5; ++i) {
    const u128 t = static_cast<u128>(x[i]) - ql[i] - borrow;
    r[i] = static_cast<u64>(t);
    borrow = static_cast<u64>(t >> 64) & 1;
  }
  for (int pass = 0; pass < 2 && !LessThanOrder(r, 5); ++pass) {  // r < 3L
    borrow = 0;
    for (int i = 0; i < 5; ++i) {
      const u128 t = static_cast<u128>(r[i]) - (i < 4 ? kOrder[i] : 0) - borrow;
      r[i] = static_cast<u64>(t);
      borrow = static_cast<u64>(t >> 64) & 1;
    }
  }
  std::array<uint8_t, 32> out;
  std::memcpy(out.data(), r, 32);
  return out;
}

absl::StatusOr<std::shared_ptr<const Ed25519PublicKeyTable>> DecodePublicKey(
    absl::string_view raw) {
  if (raw.size() != 32) {
    return absl::InvalidArgumentError("Ed25519 public key must be 32 bytes");
  }
  const auto* s = reinterpret_cast<const uint8_t*>(raw.data());
  absl::StatusOr<P3> a = Decode(s);
  if (!a.ok()) return a.status();
  // Small order iff [8]A is the identity (X = 0: [8]A = (0, -1) would have
  // order 2, making A's order divide 16 and so 8).
  P2 r = ToP2(*a);
  for (int i = 0; i < 3; ++i) r = ToP2(Dbl(r));
  if (IsZero(r.x)) return absl::InvalidArgumentError("Ed25519 public key has small order");
  auto table = std::make_shared<Ed25519PublicKeyTable>();
  std::memcpy(table->raw, s, 32);
  const P3 neg{Neg(a->x), a->y, a->z, Neg(a->t)};
  table->neg_odd = OddMultiples<8>(neg);
  return std::shared_ptr<const Ed25519PublicKeyTable>(std::move(table));
}

absl::Status VerifySignature(const Ed25519PublicKeyTable& key, absl::string_view message,
                             absl::string_view signature) {
  if (signature.size() != 64) {
    return absl::UnauthenticatedError("Ed25519 signature must be 64 bytes");
  }
  const auto* sig = reinterpret_cast<const uint8_t*>(signature.data());
  u64 s_limbs[4];
  std::memcpy(s_limbs, sig + 32, 32);
  if (!LessThanOrder(s_limbs, 4)) {
    return absl::UnauthenticatedError("Ed25519 signature does not verify (S >= L)");
  }
  // k = SHA-512(R || A || M) mod L.
  static EVP_MD* const sha512 = EVP_MD_fetch(nullptr, "SHA512", nullptr);
  thread_local std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::array<uint8_t, 64> digest;
  unsigned int digest_len = 0;
  if (sha512 == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), sha512, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), sig, 32) != 1 || EVP_DigestUpdate(ctx.get(), key.raw, 32) != 1 ||
      EVP_DigestUpdate(ctx.get(), message.data(), message.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest.data(), &digest_len) != 1 || digest_len != 64) {
    return absl::InternalError("SHA-512 failed");
  }
  const std::array<uint8_t, 32> k = ReduceModOrder(digest);
  // [S]B + [k](-A), most significant NAF digit first.
  const std::array<int8_t, 257> naf_s = Naf(sig + 32, 8);
  const std::array<int8_t, 257> naf_k = Naf(k.data(), 5);
  const BaseTable& base = Base();
  int i = 256;
  while (i >= 0 && naf_s[i] == 0 && naf_k[i] == 0) --i;
  P2 r{kZero, kOne, kOne};
  for (; i >= 0; --i) {
    P1P1 t = Dbl(r);
    if (naf_k[i] != 0) {
      t = AddCached(ToP3(t), key.neg_odd[std::abs(naf_k[i]) / 2], naf_k[i] < 0);
    }
    if (naf_s[i] != 0) {
      t = AddCached(ToP3(t), base.odd[std::abs(naf_s[i]) / 2], naf_s[i] < 0);
    }
    r = ToP2(t);
  }
  const Fe z_inv = Invert(r.z);
  std::array<uint8_t, 32> encoded = ToBytes(Mul(r.y, z_inv));
  if (IsNegative(Mul(r.x, z_inv))) encoded[31] |= 0x80;
  if (std::memcmp(encoded.data(), sig, 32) != 0) {
    return absl::UnauthenticatedError("Ed25519 signature does not verify");
  }
  return absl::OkStatus();
}

}  // namespace tandem::crypto::internal
