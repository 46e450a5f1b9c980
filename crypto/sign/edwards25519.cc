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
#include "crypto/sign/edwards25519_arith.h"

namespace tandem::crypto::internal::ed25519 {

absl::Status Sha512(std::initializer_list<absl::string_view> parts, uint8_t out[64]) {
  struct MdCtxFree {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  static EVP_MD* const sha512 = EVP_MD_fetch(nullptr, "SHA512", nullptr);
  thread_local std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (sha512 == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), sha512, nullptr) != 1) {
    return absl::InternalError("SHA-512 failed");
  }
  for (absl::string_view part : parts) {
    if (EVP_DigestUpdate(ctx.get(), part.data(), part.size()) != 1) {
      return absl::InternalError("SHA-512 failed");
    }
  }
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), out, &len) != 1 || len != 64) {
    return absl::InternalError("SHA-512 failed");
  }
  return absl::OkStatus();
}

namespace {

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

// Variable time: for a signature's public S.
bool LessThanOrder(const u64 (&r)[4]) {
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
    auto* t = new BaseTable;
    t->odd = OddMultiples<64>(BasePoint());
    return t;
  }();
  return *table;
}

}  // namespace

P3 BasePoint() {
  // The base point's encoding: y = 4/5, x even (RFC 8032 section 5.1).
  uint8_t b[32];
  std::memset(b, 0x66, sizeof(b));
  b[0] = 0x58;
  return *Decode(b);
}

struct PublicKeyTable {
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
  MulAddLimbs(q1, 5, kBarrettMu, 5, q2, 10);
  u64 q3[5];
  for (int i = 0; i < 5; ++i) q3[i] = (q2[i + 4] >> 4) | (q2[i + 5] << 60);
  // r = (x - q3 L) mod 2^320.
  u64 ql[5] = {};
  MulAddLimbs(q3, 5, kOrder, 4, ql, 5);
  u64 r[5];
  u64 borrow = 0;
  for (int i = 0; i < 5; ++i) {
    const u128 t = static_cast<u128>(x[i]) - ql[i] - borrow;
    r[i] = static_cast<u64>(t);
    borrow = static_cast<u64>(t >> 64) & 1;
  }
  // Two constant-time conditional subtractions (r < 3L; the signer reduces
  // secrets here): r - L replaces r iff it does not borrow.
  for (int pass = 0; pass < 2; ++pass) {
    u64 t[5];
    borrow = 0;
    for (int i = 0; i < 5; ++i) {
      const u128 d = static_cast<u128>(r[i]) - (i < 4 ? kOrder[i] : 0) - borrow;
      t[i] = static_cast<u64>(d);
      borrow = static_cast<u64>(d >> 64) & 1;
    }
    const u64 keep_t = borrow - 1;  // all ones iff r >= L
    for (int i = 0; i < 5; ++i) r[i] = (t[i] & keep_t) | (r[i] & ~keep_t);
  }
  std::array<uint8_t, 32> out;
  std::memcpy(out.data(), r, 32);
  return out;
}

absl::StatusOr<std::shared_ptr<const PublicKeyTable>> DecodePublicKey(absl::string_view raw) {
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
  auto table = std::make_shared<PublicKeyTable>();
  std::memcpy(table->raw, s, 32);
  const P3 neg{Neg(a->x), a->y, a->z, Neg(a->t)};
  table->neg_odd = OddMultiples<8>(neg);
  return std::shared_ptr<const PublicKeyTable>(std::move(table));
}

absl::Status VerifySignature(const PublicKeyTable& key, absl::string_view message,
                             absl::string_view signature) {
  if (signature.size() != 64) {
    return absl::UnauthenticatedError("Ed25519 signature must be 64 bytes");
  }
  const auto* sig = reinterpret_cast<const uint8_t*>(signature.data());
  u64 s_limbs[4];
  std::memcpy(s_limbs, sig + 32, 32);
  if (!LessThanOrder(s_limbs)) {
    return absl::UnauthenticatedError("Ed25519 signature does not verify (S >= L)");
  }
  // k = SHA-512(R || A || M) mod L.
  std::array<uint8_t, 64> digest;
  const auto str = [](const uint8_t* p) {
    return absl::string_view(reinterpret_cast<const char*>(p), 32);
  };
  if (absl::Status st = Sha512({str(sig), str(key.raw), message}, digest.data()); !st.ok()) {
    return st;
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

}  // namespace tandem::crypto::internal::ed25519
