#include "crypto/sign/edwards25519.h"

#include <openssl/bn.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/ed25519.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// The variable-time verifier against independent references: OpenSSL's
// EVP verification (a different implementation of RFC 8032), BIGNUM for
// the reduction modulo L and for the decoding rule (Euler's criterion
// instead of the square root the decoder computes).

namespace tandem::crypto::internal::ed25519 {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct BnCtxFree {
  void operator()(BN_CTX* c) const { BN_CTX_free(c); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn FromLe(const uint8_t* p, size_t n) { return Bn(BN_lebin2bn(p, static_cast<int>(n), nullptr)); }
Bn FromDec(const char* dec) {
  BIGNUM* b = nullptr;
  BN_dec2bn(&b, dec);
  return Bn(b);
}

std::string RandomBytes(SecureRandom* rng, size_t n) {
  std::string out(n, '\0');
  EXPECT_THAT(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), n)), IsOk());
  return out;
}

TEST(Edwards25519Test, ReductionModOrderMatchesBignum) {
  std::unique_ptr<BN_CTX, BnCtxFree> ctx(BN_CTX_new());
  Bn l = FromDec("7237005577332262213973186563042994240857116359379907606001950938285454250989");
  ASSERT_NE(l, nullptr);
  auto rng = DeterministicRandom::FromSeed(7);
  std::vector<std::array<uint8_t, 64>> inputs(2000);
  for (auto& in : inputs) {
    const std::string r = RandomBytes(rng.get(), 64);
    std::copy(r.begin(), r.end(), in.begin());
  }
  // Edges: 0 and 2^512 - 1.
  inputs.push_back({});
  std::array<uint8_t, 64> ones;
  ones.fill(0xff);
  inputs.push_back(ones);
  for (int i = 0; i < 500; ++i) {  // near 2^512, where Barrett's quotient errs most
    std::array<uint8_t, 64> in = inputs[i];
    for (int b = 56; b < 64; ++b) in[b] = 0xff;
    inputs.push_back(in);
  }
  // m L + {-1, 0, 1} for m in {1, 2, 3, floor(2^512 / L) - 1, floor(2^512 / L)}.
  Bn top(BN_new()), m_max(BN_new());
  BN_set_bit(top.get(), 512);
  BN_div(m_max.get(), nullptr, top.get(), l.get(), ctx.get());
  for (int mult = 1; mult <= 5; ++mult) {
    for (int delta = -1; delta <= 1; ++delta) {
      Bn v(BN_new());
      if (mult <= 3) {
        BN_copy(v.get(), l.get());
        BN_mul_word(v.get(), mult);
      } else {
        BN_copy(v.get(), m_max.get());
        if (mult == 4) BN_sub_word(v.get(), 1);
        BN_mul(v.get(), v.get(), l.get(), ctx.get());
      }
      if (delta < 0) BN_sub_word(v.get(), 1);
      if (delta > 0) BN_add_word(v.get(), 1);
      if (BN_num_bits(v.get()) > 512) continue;
      std::array<uint8_t, 64> in{};
      ASSERT_EQ(BN_bn2lebinpad(v.get(), in.data(), 64), 64);
      inputs.push_back(in);
    }
  }
  for (const auto& in : inputs) {
    Bn x = FromLe(in.data(), 64);
    Bn want(BN_new());
    ASSERT_EQ(BN_nnmod(want.get(), x.get(), l.get(), ctx.get()), 1);
    std::array<uint8_t, 32> want_le{};
    ASSERT_EQ(BN_bn2lebinpad(want.get(), want_le.data(), 32), 32);
    ASSERT_EQ(ReduceModOrder(in), want_le)
        << absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(in.data()), 64));
  }
}

// RFC 8032 5.1.3 with BIGNUM: y < p, x^2 = (y^2 - 1)/(d y^2 + 1) a square by
// Euler's criterion (x = 0 needs sign 0), and not of small order (y in
// {0, 1, -1}, or 2P has y = 0: d y^4 + 2 y^2 - 1 = 0).
bool ReferenceAccepts(const std::string& raw, BN_CTX* ctx) {
  std::array<uint8_t, 32> le;
  std::copy(raw.begin(), raw.end(), le.begin());
  const bool sign = (le[31] & 0x80) != 0;
  le[31] &= 0x7f;
  Bn p(BN_new()), d(BN_new()), t(BN_new()), y2(BN_new()), u(BN_new()), v(BN_new()), one(BN_new()),
      e(BN_new());
  BN_one(one.get());
  BN_set_bit(p.get(), 255);
  BN_sub_word(p.get(), 19);
  Bn y = FromLe(le.data(), 32);
  if (BN_cmp(y.get(), p.get()) >= 0) return false;
  BN_set_word(t.get(), 121666);
  BN_mod_inverse(d.get(), t.get(), p.get(), ctx);
  BN_mul_word(d.get(), 121665);
  BN_sub(d.get(), p.get(), d.get());
  BN_nnmod(d.get(), d.get(), p.get(), ctx);
  BN_mod_sqr(y2.get(), y.get(), p.get(), ctx);
  BN_mod_sub(u.get(), y2.get(), one.get(), p.get(), ctx);
  BN_mod_mul(v.get(), d.get(), y2.get(), p.get(), ctx);
  BN_mod_add(v.get(), v.get(), one.get(), p.get(), ctx);
  BN_mod_inverse(t.get(), v.get(), p.get(), ctx);
  BN_mod_mul(t.get(), u.get(), t.get(), p.get(), ctx);  // x^2
  if (BN_is_zero(t.get())) {
    if (sign) return false;
  } else {
    BN_rshift1(e.get(), p.get());  // (p - 1) / 2
    Bn chi(BN_new());
    BN_mod_exp(chi.get(), t.get(), e.get(), p.get(), ctx);
    if (!BN_is_one(chi.get())) return false;
  }
  BN_add(t.get(), y.get(), one.get());
  if (BN_is_zero(y.get()) || BN_is_one(y.get()) || BN_cmp(t.get(), p.get()) == 0) return false;
  BN_mod_sqr(t.get(), y2.get(), p.get(), ctx);
  BN_mod_mul(t.get(), t.get(), d.get(), p.get(), ctx);
  BN_mod_add(t.get(), t.get(), y2.get(), p.get(), ctx);
  BN_mod_add(t.get(), t.get(), y2.get(), p.get(), ctx);
  BN_mod_sub(t.get(), t.get(), one.get(), p.get(), ctx);
  return !BN_is_zero(t.get());
}

TEST(Edwards25519Test, DecodingMatchesTheBignumRule) {
  std::unique_ptr<BN_CTX, BnCtxFree> ctx(BN_CTX_new());
  auto rng = DeterministicRandom::FromSeed(11);
  std::vector<std::string> encodings;
  for (int i = 0; i < 600; ++i) encodings.push_back(RandomBytes(rng.get(), 32));
  // y near 0 and near p (both signs): torsion points, non-squares, y >= p.
  for (int small = 0; small < 24; ++small) {
    for (const uint8_t top : {uint8_t{0x00}, uint8_t{0x80}}) {
      std::string low(32, '\0');
      low[0] = static_cast<char>(small);
      low[31] = static_cast<char>(top);
      encodings.push_back(low);
      std::string high(32, '\xff');
      high[0] = static_cast<char>(0xff - small);
      high[31] = static_cast<char>(0x7f | top);
      encodings.push_back(high);
    }
  }
  int accepted = 0;
  for (const std::string& raw : encodings) {
    const bool want = ReferenceAccepts(raw, ctx.get());
    absl::StatusOr<std::shared_ptr<const PublicKeyTable>> got = DecodePublicKey(raw);
    ASSERT_EQ(got.ok(), want) << absl::BytesToHexString(raw) << " " << got.status();
    if (!got.ok()) {
      EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument));
    }
    accepted += want ? 1 : 0;
  }
  // About half of all y are on the curve; both outcomes are exercised.
  EXPECT_GT(accepted, 250);
  EXPECT_LT(accepted, static_cast<int>(encodings.size()) - 250);
}

absl::Status OpenSslVerify(const std::string& pub, const std::string& msg, const std::string& sig) {
  EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(pub.data()), pub.size());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  static const unsigned char kEmpty = 0;
  const bool ok =
      pkey != nullptr && ctx != nullptr &&
      EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       msg.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(msg.data()),
                       msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  return ok ? absl::OkStatus() : absl::UnauthenticatedError("OpenSSL: does not verify");
}

// Valid signatures of random messages under random keys verify with both;
// every kind of tampering is refused by both.
TEST(Edwards25519Test, AgreesWithOpenSslOnValidAndTamperedSignatures) {
  auto rng = DeterministicRandom::FromSeed(5);
  std::string previous_sig;
  for (int i = 0; i < 150; ++i) {
    SCOPED_TRACE(i);
    auto key = Ed25519SigningKey::Generate(rng.get());
    ASSERT_THAT(key, IsOk());
    const std::string pub = key->PublicKeyRaw();
    auto table = DecodePublicKey(pub);
    ASSERT_THAT(table, IsOk());
    const std::string msg = RandomBytes(rng.get(), static_cast<size_t>(i % 70));
    auto signed_msg = key->Sign(msg);
    ASSERT_THAT(signed_msg, IsOk());
    const std::string sig = *signed_msg;
    ASSERT_THAT(OpenSslVerify(pub, msg, sig), IsOk());
    EXPECT_THAT(VerifySignature(**table, msg, sig), IsOk());

    std::vector<std::pair<std::string, std::string>> bad;  // (message, signature)
    std::string flipped = sig;
    const size_t bit = static_cast<size_t>(i * 37) % 512;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    bad.emplace_back(msg, flipped);
    bad.emplace_back(msg + "x", sig);
    if (!previous_sig.empty()) {
      bad.emplace_back(msg, previous_sig.substr(0, 32) + sig.substr(32));  // another R
      bad.emplace_back(msg, sig.substr(0, 32) + previous_sig.substr(32));  // another S
    }
    std::string s_plus_l = sig;  // S + L: also satisfies the group equation
    const std::string l =
        absl::HexStringToBytes("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010");
    unsigned carry = 0;
    for (int b = 0; b < 32; ++b) {
      const unsigned sum =
          static_cast<uint8_t>(s_plus_l[32 + b]) + static_cast<uint8_t>(l[b]) + carry;
      s_plus_l[32 + b] = static_cast<char>(sum & 0xff);
      carry = sum >> 8;
    }
    if (carry == 0) bad.emplace_back(msg, s_plus_l);
    for (const auto& [m, s] : bad) {
      EXPECT_THAT(OpenSslVerify(pub, m, s), StatusIs(absl::StatusCode::kUnauthenticated));
      EXPECT_THAT(VerifySignature(**table, m, s), StatusIs(absl::StatusCode::kUnauthenticated));
    }
    previous_sig = sig;
  }
}

// The constant-time signer against OpenSSL's: Ed25519 is deterministic, so
// public keys and signatures must be byte-identical.
TEST(Edwards25519Test, SignaturesAndPublicKeysAreOpenSslsByteForByte) {
  auto rng = DeterministicRandom::FromSeed(13);
  std::vector<std::string> seeds = {std::string(32, '\0'), std::string(32, '\xff')};
  for (int i = 0; i < 200; ++i) seeds.push_back(RandomBytes(rng.get(), 32));
  for (size_t i = 0; i < seeds.size(); ++i) {
    SCOPED_TRACE(i);
    const std::string& seed = seeds[i];
    EVP_PKEY* pkey = EVP_PKEY_new_raw_private_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), 32);
    ASSERT_NE(pkey, nullptr);
    std::string want_pub(32, '\0');
    size_t pub_len = 32;
    ASSERT_EQ(EVP_PKEY_get_raw_public_key(pkey, reinterpret_cast<unsigned char*>(want_pub.data()),
                                          &pub_len),
              1);
    const std::string msg = RandomBytes(rng.get(), i % 3 == 0 ? 0 : (i * 13) % 300);
    std::string want_sig(64, '\0');
    size_t sig_len = 64;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    static const unsigned char kEmpty = 0;
    const bool signed_ok =
        EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
        EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(want_sig.data()), &sig_len,
                       msg.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(msg.data()),
                       msg.size()) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    ASSERT_TRUE(signed_ok);

    ExpandedKey key;
    ASSERT_THAT(ExpandSeed(seed, &key), IsOk());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(key.public_key), 32), want_pub);
    std::string sig(64, '\0');
    ASSERT_THAT(Sign(key, msg, reinterpret_cast<uint8_t*>(sig.data())), IsOk());
    EXPECT_EQ(absl::BytesToHexString(sig), absl::BytesToHexString(want_sig));
  }
  ExpandedKey key;
  EXPECT_THAT(ExpandSeed(std::string(31, 'x'), &key), StatusIs(absl::StatusCode::kInvalidArgument));
}

// R's encoding is compared byte for byte: setting the unused-by-y sign bit
// of R or giving S of 33 bytes' worth never verifies.
TEST(Edwards25519Test, MalformedSignaturesAreUnauthenticated) {
  auto rng = DeterministicRandom::FromSeed(9);
  auto key = Ed25519SigningKey::Generate(rng.get());
  ASSERT_THAT(key, IsOk());
  auto table = DecodePublicKey(key->PublicKeyRaw());
  ASSERT_THAT(table, IsOk());
  const std::string sig = *key->Sign("m");
  EXPECT_THAT(VerifySignature(**table, "m", sig), IsOk());
  EXPECT_THAT(VerifySignature(**table, "m", sig.substr(0, 63)),
              StatusIs(absl::StatusCode::kUnauthenticated));
  std::string high_s = sig;
  high_s[63] = static_cast<char>(0xff);
  EXPECT_THAT(VerifySignature(**table, "m", high_s), StatusIs(absl::StatusCode::kUnauthenticated));
  std::string r_sign = sig;
  r_sign[31] = static_cast<char>(r_sign[31] ^ 0x80);
  EXPECT_THAT(VerifySignature(**table, "m", r_sign), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(DecodePublicKey(key->PublicKeyRaw().substr(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto::internal::ed25519
