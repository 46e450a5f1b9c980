#include "crypto/sign/ed25519.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "base/status_macros.h"

namespace tandem::crypto {
namespace internal {

PkeyRef::PkeyRef(const PkeyRef& other) : pkey_(other.pkey_) {
  // EVP_PKEY_up_ref is an atomic increment; it cannot fail on a valid key.
  if (pkey_ != nullptr) EVP_PKEY_up_ref(pkey_);
}

PkeyRef& PkeyRef::operator=(const PkeyRef& other) {
  if (this != &other) {
    if (other.pkey_ != nullptr) EVP_PKEY_up_ref(other.pkey_);
    EVP_PKEY_free(pkey_);
    pkey_ = other.pkey_;
  }
  return *this;
}

PkeyRef& PkeyRef::operator=(PkeyRef&& other) noexcept {
  if (this != &other) {
    EVP_PKEY_free(pkey_);
    pkey_ = other.pkey_;
    other.pkey_ = nullptr;
  }
  return *this;
}

PkeyRef::~PkeyRef() { EVP_PKEY_free(pkey_); }

}  // namespace internal

namespace {

using internal::PkeyRef;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct BnCtxFree {
  void operator()(BN_CTX* c) const { BN_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using BnCtxPtr = std::unique_ptr<BN_CTX, BnCtxFree>;

// OpenSSL failures leave entries on the calling thread's error queue; drop
// them so that they neither accumulate nor leak into unrelated callers.
absl::Status OpenSslError(absl::StatusCode code, absl::string_view what) {
  ERR_clear_error();
  return absl::Status(code, what);
}

// Never prompts: an encrypted PEM simply fails to parse.
int NoPassword(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return -1; }

// Empty messages still need a valid pointer for some EVP code paths.
const unsigned char* MessageData(absl::string_view m) {
  static const unsigned char kEmpty = 0;
  return m.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(m.data());
}

absl::StatusOr<BioPtr> ReadBio(absl::string_view pem) {
  if (pem.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("Ed25519 PEM too large");
  }
  BioPtr bio(BIO_new_mem_buf(pem.empty() ? "" : pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return OpenSslError(absl::StatusCode::kInternal, "BIO_new_mem_buf failed");
  return bio;
}

absl::StatusOr<std::string> BioContents(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL API
  if (len <= 0 || data == nullptr) {
    return OpenSslError(absl::StatusCode::kInternal, "empty PEM output");
  }
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> RawPublicKey(EVP_PKEY* pkey) {
  std::string raw(kEd25519PublicKeySize, '\0');
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1 ||
      len != kEd25519PublicKeySize) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_PKEY_get_raw_public_key failed");
  }
  return raw;
}

// RFC 8032 section 5.1.3 decoding of a public key, plus the small-order check
// (libsodium and others refuse such keys too). Public data only, so the
// variable-time BIGNUM arithmetic is fine. On edwards25519
// (-x^2 + y^2 = 1 + d x^2 y^2, p = 2^255 - 19, d = -121665/121666):
//   x^2 = (y^2 - 1) / (d y^2 + 1) must be a square (and x = 0 needs sign 0);
//   order 1, 2, 4: y = 1, y = -1, y = 0;
//   order 8: 2P has y = 0, i.e. x^2 = -y^2, i.e. d y^4 + 2 y^2 - 1 = 0.
absl::Status CheckPublicPoint(absl::string_view raw) {
  std::array<unsigned char, kEd25519PublicKeySize> le;
  for (size_t i = 0; i < le.size(); ++i) le[i] = static_cast<unsigned char>(raw[i]);
  const bool x_sign = (le[31] & 0x80) != 0;
  le[31] &= 0x7f;

  BnCtxPtr ctx(BN_CTX_new());
  if (ctx == nullptr) return OpenSslError(absl::StatusCode::kInternal, "BN_CTX_new failed");
  BN_CTX_start(ctx.get());
  struct EndFrame {
    BN_CTX* c;
    ~EndFrame() { BN_CTX_end(c); }
  } end_frame{ctx.get()};
  BIGNUM* p = BN_CTX_get(ctx.get());
  BIGNUM* d = BN_CTX_get(ctx.get());
  BIGNUM* y = BN_CTX_get(ctx.get());
  BIGNUM* y2 = BN_CTX_get(ctx.get());
  BIGNUM* u = BN_CTX_get(ctx.get());
  BIGNUM* v = BN_CTX_get(ctx.get());
  BIGNUM* x2 = BN_CTX_get(ctx.get());
  BIGNUM* t = BN_CTX_get(ctx.get());
  BIGNUM* one = BN_CTX_get(ctx.get());
  if (one == nullptr) return OpenSslError(absl::StatusCode::kInternal, "BN_CTX_get failed");
  auto ok = [](int r) { return r == 1; };
  // p = 2^255 - 19; d = -121665 * 121666^-1 mod p.
  if (!ok(BN_set_word(p, 0)) || !ok(BN_set_bit(p, 255)) || !ok(BN_sub_word(p, 19)) ||
      !ok(BN_one(one)) || !ok(BN_set_word(t, 121666)) ||
      BN_mod_inverse(d, t, p, ctx.get()) == nullptr || !ok(BN_mul_word(d, 121665)) ||
      !ok(BN_sub(d, p, d)) || !ok(BN_nnmod(d, d, p, ctx.get())) ||
      BN_lebin2bn(le.data(), static_cast<int>(le.size()), y) == nullptr) {
    return OpenSslError(absl::StatusCode::kInternal, "BIGNUM setup failed");
  }
  if (BN_cmp(y, p) >= 0) {
    return absl::InvalidArgumentError("Ed25519 public key is not canonical (y >= p)");
  }
  // u = y^2 - 1, v = d y^2 + 1, x2 = u / v.
  if (!ok(BN_mod_sqr(y2, y, p, ctx.get())) || !ok(BN_mod_sub(u, y2, one, p, ctx.get())) ||
      !ok(BN_mod_mul(v, d, y2, p, ctx.get())) || !ok(BN_mod_add(v, v, one, p, ctx.get())) ||
      BN_mod_inverse(t, v, p, ctx.get()) == nullptr || !ok(BN_mod_mul(x2, u, t, p, ctx.get()))) {
    return OpenSslError(absl::StatusCode::kInternal, "BIGNUM arithmetic failed");
  }
  if (BN_is_zero(x2)) {
    if (x_sign) return absl::InvalidArgumentError("Ed25519 public key: x = 0 with sign bit set");
  } else if (BN_mod_sqrt(t, x2, p, ctx.get()) == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument,
                        "Ed25519 public key is not a point of the curve");
  }
  // Small order: y in {0, 1, p - 1}, or d y^4 + 2 y^2 - 1 == 0.
  if (!ok(BN_add(t, y, one))) return OpenSslError(absl::StatusCode::kInternal, "BN_add failed");
  const bool order_1_2_4 = BN_is_zero(y) || BN_is_one(y) || BN_cmp(t, p) == 0;
  if (!ok(BN_mod_sqr(t, y2, p, ctx.get())) || !ok(BN_mod_mul(t, t, d, p, ctx.get())) ||
      !ok(BN_mod_add(t, t, y2, p, ctx.get())) || !ok(BN_mod_add(t, t, y2, p, ctx.get())) ||
      !ok(BN_mod_sub(t, t, one, p, ctx.get()))) {
    return OpenSslError(absl::StatusCode::kInternal, "BIGNUM arithmetic failed");
  }
  if (order_1_2_4 || BN_is_zero(t)) {
    return absl::InvalidArgumentError("Ed25519 public key has small order");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PublicPem(EVP_PKEY* pkey) {
  if (pkey == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_PUBKEY(bio.get(), pkey) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "PEM_write_bio_PUBKEY failed");
  }
  return BioContents(bio.get());
}

}  // namespace

// ---------------------------------------------------------------------------
// Ed25519VerifyingKey

absl::StatusOr<Ed25519VerifyingKey> Ed25519VerifyingKey::FromRaw(absl::string_view raw) {
  if (raw.size() != kEd25519PublicKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ed25519 public key must be 32 bytes, got ", raw.size()));
  }
  TANDEM_RETURN_IF_ERROR(CheckPublicPoint(raw));
  return FromRawVouched(raw);
}

absl::StatusOr<Ed25519VerifyingKey> Ed25519VerifyingKey::FromRawVouched(absl::string_view raw) {
  if (raw.size() != kEd25519PublicKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ed25519 public key must be 32 bytes, got ", raw.size()));
  }
  PkeyRef pkey(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
  if (pkey.get() == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument,
                        "EVP_PKEY_new_raw_public_key refused the Ed25519 key");
  }
  return Ed25519VerifyingKey(std::move(pkey), std::string(raw));
}

absl::StatusOr<Ed25519VerifyingKey> Ed25519VerifyingKey::FromPem(absl::string_view pem) {
  TANDEM_ASSIGN_OR_RETURN(BioPtr bio, ReadBio(pem));
  PkeyRef pkey(PEM_read_bio_PUBKEY(bio.get(), nullptr, &NoPassword, nullptr));
  if (pkey.get() == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument,
                        "not a SubjectPublicKeyInfo PEM (BEGIN PUBLIC KEY)");
  }
  if (EVP_PKEY_is_a(pkey.get(), "ED25519") != 1) {
    return OpenSslError(absl::StatusCode::kInvalidArgument, "PEM public key is not Ed25519");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string raw, RawPublicKey(pkey.get()));
  // Re-create from the raw bytes so that both factories apply the same checks
  // and hold the same kind of key object.
  return FromRaw(raw);
}

absl::Status Ed25519VerifyingKey::Verify(absl::string_view message,
                                         absl::string_view signature) const {
  if (pkey_.get() == nullptr) {
    return absl::UnauthenticatedError("empty (moved-from) Ed25519 verifying key");
  }
  if (signature.size() != kEd25519SignatureSize) {
    return absl::UnauthenticatedError(
        absl::StrCat("Ed25519 signature must be 64 bytes, got ", signature.size()));
  }
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr) return OpenSslError(absl::StatusCode::kInternal, "EVP_MD_CTX_new failed");
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey_.get()) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_DigestVerifyInit failed");
  }
  const int r =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), MessageData(message), message.size());
  if (r != 1) {
    return OpenSslError(absl::StatusCode::kUnauthenticated, "Ed25519 signature does not verify");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Ed25519VerifyingKey::Pem() const { return PublicPem(pkey_.get()); }

// ---------------------------------------------------------------------------
// Ed25519SigningKey

absl::StatusOr<Ed25519SigningKey> Ed25519SigningKey::FromSeed(absl::string_view seed) {
  if (seed.size() != kEd25519SeedSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ed25519 seed must be 32 bytes, got ", seed.size()));
  }
  PkeyRef pkey(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), seed.size()));
  if (pkey.get() == nullptr) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_PKEY_new_raw_private_key failed");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string public_raw, RawPublicKey(pkey.get()));
  return Ed25519SigningKey(std::move(pkey), std::move(public_raw));
}

absl::StatusOr<Ed25519SigningKey> Ed25519SigningKey::FromPem(absl::string_view pem) {
  TANDEM_ASSIGN_OR_RETURN(BioPtr bio, ReadBio(pem));
  PkeyRef parsed(PEM_read_bio_PrivateKey(bio.get(), nullptr, &NoPassword, nullptr));
  if (parsed.get() == nullptr) {
    return OpenSslError(absl::StatusCode::kInvalidArgument,
                        "not an unencrypted PKCS#8 PEM (BEGIN PRIVATE KEY)");
  }
  if (EVP_PKEY_is_a(parsed.get(), "ED25519") != 1) {
    return OpenSslError(absl::StatusCode::kInvalidArgument, "PEM private key is not Ed25519");
  }
  std::array<unsigned char, kEd25519SeedSize> seed;
  size_t len = seed.size();
  if (EVP_PKEY_get_raw_private_key(parsed.get(), seed.data(), &len) != 1 ||
      len != kEd25519SeedSize) {
    OPENSSL_cleanse(seed.data(), seed.size());
    return OpenSslError(absl::StatusCode::kInvalidArgument, "cannot read the Ed25519 private key");
  }
  absl::StatusOr<Ed25519SigningKey> key =
      FromSeed(absl::string_view(reinterpret_cast<const char*>(seed.data()), seed.size()));
  OPENSSL_cleanse(seed.data(), seed.size());
  return key;
}

absl::StatusOr<Ed25519SigningKey> Ed25519SigningKey::Generate(SecureRandom* rng) {
  if (rng == nullptr) return absl::InvalidArgumentError("Generate: null SecureRandom");
  std::array<uint8_t, kEd25519SeedSize> seed;
  absl::Status filled = rng->Fill(absl::MakeSpan(seed));
  if (!filled.ok()) {
    OPENSSL_cleanse(seed.data(), seed.size());
    return filled;
  }
  absl::StatusOr<Ed25519SigningKey> key =
      FromSeed(absl::string_view(reinterpret_cast<const char*>(seed.data()), seed.size()));
  OPENSSL_cleanse(seed.data(), seed.size());
  return key;
}

absl::StatusOr<std::string> Ed25519SigningKey::PublicKeyPem() const {
  return PublicPem(pkey_.get());
}

absl::StatusOr<std::string> Ed25519SigningKey::PrivateKeyPem() const {
  if (pkey_.get() == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_PKCS8PrivateKey(bio.get(), pkey_.get(), nullptr, nullptr, 0,
                                                      nullptr, nullptr) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "PEM_write_bio_PKCS8PrivateKey failed");
  }
  absl::StatusOr<std::string> pem = BioContents(bio.get());
  // The memory BIO held the secret: wipe its buffer before it is freed.
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int)
  if (data != nullptr && len > 0) OPENSSL_cleanse(data, static_cast<size_t>(len));
  return pem;
}

absl::StatusOr<Ed25519VerifyingKey> Ed25519SigningKey::VerifyingKey() const {
  if (pkey_.get() == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  absl::StatusOr<Ed25519VerifyingKey> key = Ed25519VerifyingKey::FromRaw(public_raw_);
  if (!key.ok()) return absl::InternalError(key.status().message());
  return key;
}

absl::StatusOr<std::string> Ed25519SigningKey::Sign(absl::string_view message) const {
  if (pkey_.get() == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr) return OpenSslError(absl::StatusCode::kInternal, "EVP_MD_CTX_new failed");
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey_.get()) != 1) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_DigestSignInit failed");
  }
  std::string sig(kEd25519SignatureSize, '\0');
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     MessageData(message), message.size()) != 1 ||
      len != kEd25519SignatureSize) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_DigestSign failed");
  }
  return sig;
}

}  // namespace tandem::crypto
