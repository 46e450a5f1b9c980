// Constant-time Ed25519 signing (RFC 8032 sections 5.1.5 and 5.1.6).
//
// [a]B for a secret a: a is recoded into 64 signed radix-16 digits e_i in
// [-8, 8] (a = sum e_i 16^i), and the result is the sum of 64 points
// e_i 16^i B, each taken from a precomputed table of (j+1) 16^i B, j < 8, by
// reading all 8 entries under masks and negating under a mask. No doubling
// is needed; the sequence of field operations is the same for every a.
// The table (64 x 8 affine points, 60 KiB) holds public multiples of B.
#include <openssl/crypto.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "crypto/sign/edwards25519.h"
#include "crypto/sign/edwards25519_arith.h"

namespace tandem::crypto::internal::ed25519 {
namespace {

// An affine point as (y + x, y - x, 2 d x y), limbs carried.
struct Niels {
  Fe ypx, ymx, xy2d;
};

struct FixedBaseTable {
  Niels t[64][8];  // t[i][j] = (j + 1) 16^i B
};

Niels ToNiels(const P3& p) {
  const Fe z_inv = Invert(p.z);
  const Fe x = Mul(p.x, z_inv);
  const Fe y = Mul(p.y, z_inv);
  return Niels{Carry(Add(y, x)), Sub(y, x), Mul(Mul(x, y), kD2)};
}

const FixedBaseTable& FixedBase() {
  static const FixedBaseTable* const table = [] {
    auto* t = new FixedBaseTable;
    P3 p = BasePoint();  // 16^i B
    for (int i = 0; i < 64; ++i) {
      const Cached step = ToCached(p);
      P3 q = p;
      for (int j = 0; j < 8; ++j) {
        t->t[i][j] = ToNiels(q);
        if (j < 7) q = ToP3(AddCached(q, step, false));
      }
      P2 r = ToP2(p);
      for (int k = 0; k < 3; ++k) r = ToP2(Dbl(r));
      p = ToP3(Dbl(r));
    }
    return t;
  }();
  return *table;
}

// All ones iff a == b (small non-negative values), without a branch.
inline u64 EqualMask(u64 a, u64 b) { return 0 - (((a ^ b) - 1) >> 63); }

inline void MoveIf(Fe* dst, const Fe& src, u64 mask) {
  for (int i = 0; i < 5; ++i) dst->v[i] ^= (dst->v[i] ^ src.v[i]) & mask;
}

// e 16^i B for e in [-8, 8]: scans the 8 entries, then negates under a mask
// (-(y+x, y-x, 2dxy) = (y-x, y+x, -2dxy)); e = 0 leaves the identity
// (1, 1, 0).
Niels Select(const Niels (&row)[8], int8_t e) {
  const u64 negative = static_cast<u64>(static_cast<int64_t>(e) >> 63);  // all ones iff e < 0
  const u64 magnitude = (static_cast<u64>(static_cast<int64_t>(e)) ^ negative) - negative;
  Niels out{kOne, kOne, kZero};
  for (u64 j = 0; j < 8; ++j) {
    const u64 mask = EqualMask(magnitude, j + 1);
    MoveIf(&out.ypx, row[j].ypx, mask);
    MoveIf(&out.ymx, row[j].ymx, mask);
    MoveIf(&out.xy2d, row[j].xy2d, mask);
  }
  const Fe swapped_ypx = out.ymx;
  const Fe swapped_ymx = out.ypx;
  const Fe negated_xy2d = Neg(out.xy2d);
  MoveIf(&out.ypx, swapped_ypx, negative);
  MoveIf(&out.ymx, swapped_ymx, negative);
  MoveIf(&out.xy2d, negated_xy2d, negative);
  return out;
}

// p + q for affine q (madd-2008-hwcd-3 with a = -1: Z2 = 1, so D = 2 Z1).
P1P1 AddNiels(const P3& p, const Niels& q) {
  const Fe a = Mul(Sub(p.y, p.x), q.ymx);
  const Fe b = Mul(Add(p.y, p.x), q.ypx);
  const Fe c = Mul(p.t, q.xy2d);
  const Fe d = Add(p.z, p.z);
  return P1P1{Sub(b, a), Add(b, a), Add(d, c), Sub(d, c)};
}

// encode([a]B) for a 32-byte little-endian a < 2^255.
std::array<uint8_t, 32> ScalarMultBase(const uint8_t* a) {
  int8_t e[64];
  for (int i = 0; i < 32; ++i) {
    e[2 * i] = static_cast<int8_t>(a[i] & 15);
    e[2 * i + 1] = static_cast<int8_t>(a[i] >> 4);
  }
  // Recode into [-8, 7] (the top digit ends in [0, 8]): carry = 1 iff e + carry >= 8.
  int8_t carry = 0;
  for (int i = 0; i < 63; ++i) {
    e[i] = static_cast<int8_t>(e[i] + carry);
    carry = static_cast<int8_t>((e[i] + 8) >> 4);
    e[i] = static_cast<int8_t>(e[i] - (carry << 4));
  }
  e[63] = static_cast<int8_t>(e[63] + carry);

  const FixedBaseTable& table = FixedBase();
  P3 h{kZero, kOne, kOne, kZero};
  for (int i = 0; i < 64; ++i) h = ToP3(AddNiels(h, Select(table.t[i], e[i])));
  OPENSSL_cleanse(e, sizeof(e));

  const Fe z_inv = Invert(h.z);
  std::array<uint8_t, 32> out = ToBytes(Mul(h.y, z_inv));
  out[31] = static_cast<uint8_t>(out[31] | ((ToBytes(Mul(h.x, z_inv))[0] & 1) << 7));
  return out;
}

absl::string_view Str(const uint8_t* p, size_t n) {
  return absl::string_view(reinterpret_cast<const char*>(p), n);
}

}  // namespace

ExpandedKey::~ExpandedKey() {
  OPENSSL_cleanse(seed, sizeof(seed));
  OPENSSL_cleanse(scalar, sizeof(scalar));
  OPENSSL_cleanse(prefix, sizeof(prefix));
}

absl::Status ExpandSeed(absl::string_view seed, ExpandedKey* out) {
  if (seed.size() != 32) return absl::InvalidArgumentError("Ed25519 seed must be 32 bytes");
  uint8_t h[64];
  absl::Status hashed = Sha512({seed}, h);
  if (hashed.ok()) {
    std::memcpy(out->seed, seed.data(), 32);
    std::memcpy(out->scalar, h, 32);
    std::memcpy(out->prefix, h + 32, 32);
    out->scalar[0] &= 248;  // a multiple of the cofactor 8
    out->scalar[31] &= 127;
    out->scalar[31] |= 64;  // 2^254 <= s < 2^255
    const std::array<uint8_t, 32> a = ScalarMultBase(out->scalar);
    std::memcpy(out->public_key, a.data(), 32);
  }
  OPENSSL_cleanse(h, sizeof(h));
  return hashed;
}

absl::Status Sign(const ExpandedKey& key, absl::string_view message, uint8_t signature[64]) {
  // r = SHA-512(prefix || M) mod L; R = [r]B.
  std::array<uint8_t, 64> wide;
  absl::Status st = Sha512({Str(key.prefix, 32), message}, wide.data());
  std::array<uint8_t, 32> r{};
  if (st.ok()) {
    r = ReduceModOrder(wide);
    const std::array<uint8_t, 32> big_r = ScalarMultBase(r.data());
    std::memcpy(signature, big_r.data(), 32);
    // k = SHA-512(R || A || M) mod L (public).
    st = Sha512({Str(signature, 32), Str(key.public_key, 32), message}, wide.data());
  }
  if (st.ok()) {
    const std::array<uint8_t, 32> k = ReduceModOrder(wide);
    // S = (r + k s) mod L: the 508-bit product plus r, reduced.
    u64 kl[4], sl[4], rl[4];
    std::memcpy(kl, k.data(), 32);
    std::memcpy(sl, key.scalar, 32);
    std::memcpy(rl, r.data(), 32);
    u64 acc[8] = {rl[0], rl[1], rl[2], rl[3], 0, 0, 0, 0};
    MulAddLimbs(kl, 4, sl, 4, acc, 8);
    std::memcpy(wide.data(), acc, 64);
    const std::array<uint8_t, 32> s = ReduceModOrder(wide);
    std::memcpy(signature + 32, s.data(), 32);
    OPENSSL_cleanse(acc, sizeof(acc));
    OPENSSL_cleanse(sl, sizeof(sl));
    OPENSSL_cleanse(rl, sizeof(rl));
  }
  OPENSSL_cleanse(wide.data(), wide.size());
  OPENSSL_cleanse(r.data(), r.size());
  return st;
}

}  // namespace tandem::crypto::internal::ed25519
