#include "crypto/sign/ed25519.h"

#include <openssl/bio.h>
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
#include "crypto/sign/edwards25519.h"

namespace tandem::crypto {
namespace {

// Sole ownership of an OpenSSL key object (PEM parsing and writing only).
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyRef = std::unique_ptr<EVP_PKEY, PkeyFree>;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// OpenSSL failures leave entries on the calling thread's error queue; drop
// them so that they neither accumulate nor leak into unrelated callers.
absl::Status OpenSslError(absl::StatusCode code, absl::string_view what) {
  ERR_clear_error();
  return absl::Status(code, what);
}

// Never prompts: an encrypted PEM simply fails to parse.
int NoPassword(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return -1; }

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
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const internal::ed25519::PublicKeyTable> table,
                          internal::ed25519::DecodePublicKey(raw));
  return Ed25519VerifyingKey(std::move(table), std::string(raw));
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
  if (table_ == nullptr) {
    return absl::UnauthenticatedError("empty (moved-from) Ed25519 verifying key");
  }
  if (signature.size() != kEd25519SignatureSize) {
    return absl::UnauthenticatedError(
        absl::StrCat("Ed25519 signature must be 64 bytes, got ", signature.size()));
  }
  return internal::ed25519::VerifySignature(*table_, message, signature);
}

absl::StatusOr<std::string> Ed25519VerifyingKey::Pem() const {
  if (table_ == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  PkeyRef pkey(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw_.data()), raw_.size()));
  if (pkey.get() == nullptr) {
    return OpenSslError(absl::StatusCode::kInternal, "EVP_PKEY_new_raw_public_key failed");
  }
  return PublicPem(pkey.get());
}

// ---------------------------------------------------------------------------
// Ed25519SigningKey

absl::StatusOr<Ed25519SigningKey> Ed25519SigningKey::FromSeed(absl::string_view seed) {
  if (seed.size() != kEd25519SeedSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ed25519 seed must be 32 bytes, got ", seed.size()));
  }
  auto key = std::make_shared<internal::ed25519::ExpandedKey>();
  TANDEM_RETURN_IF_ERROR(internal::ed25519::ExpandSeed(seed, key.get()));
  std::string public_raw(reinterpret_cast<const char*>(key->public_key), kEd25519PublicKeySize);
  return Ed25519SigningKey(std::move(key), std::move(public_raw));
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
  if (key_ == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  TANDEM_ASSIGN_OR_RETURN(Ed25519VerifyingKey pub, VerifyingKey());
  return pub.Pem();
}

absl::StatusOr<std::string> Ed25519SigningKey::PrivateKeyPem() const {
  if (key_ == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  PkeyRef pkey(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, key_->seed, sizeof(key_->seed)));
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (pkey == nullptr || bio == nullptr ||
      PEM_write_bio_PKCS8PrivateKey(bio.get(), pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
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
  if (key_ == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  absl::StatusOr<Ed25519VerifyingKey> key = Ed25519VerifyingKey::FromRaw(public_raw_);
  if (!key.ok()) return absl::InternalError(key.status().message());
  return key;
}

absl::StatusOr<std::string> Ed25519SigningKey::Sign(absl::string_view message) const {
  if (key_ == nullptr) return absl::InternalError("empty (moved-from) Ed25519 key");
  std::string sig(kEd25519SignatureSize, '\0');
  TANDEM_RETURN_IF_ERROR(
      internal::ed25519::Sign(*key_, message, reinterpret_cast<uint8_t*>(sig.data())));
  return sig;
}

}  // namespace tandem::crypto
