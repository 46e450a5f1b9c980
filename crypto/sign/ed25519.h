// Ed25519 (RFC 8032, pure EdDSA over edwards25519) signing and verifying keys.
// Used for the coordinator's upload tickets (crypto/sign/upload_ticket.h) and
// the devices' check-ins and uploads (crypto/sign/device_auth.h).
//
// Signing and verification use crypto/sign/edwards25519.h (constant time
// for the secret, variable time for verification's public data), about 3x
// faster than OpenSSL 3.0's EVP Ed25519 here (bench/README,
// crypto_sign_benchmark); PEM parsing and writing use OpenSSL.
//
// Keys are value types: copies share one immutable key object (reference
// counted). A moved-from key holds no key: its operations fail closed
// (Verify: UNAUTHENTICATED, the others: INTERNAL). No I/O: PEM comes in and
// goes out as strings; reading the files is the caller's job.
//
// Thread safety: both classes are immutable after creation; Sign() and
// Verify() use thread-local hash contexts, so concurrent calls on one key
// (or on copies of it) are safe.
//
// Error codes: INVALID_ARGUMENT for malformed keys (wrong length, a PEM that
// does not parse or is not an Ed25519 key, a public key that is not a
// canonical curve point or has small order); UNAUTHENTICATED for a signature
// that does not verify (including one that is not exactly 64 bytes);
// INTERNAL when OpenSSL fails to allocate or the random source fails.
#ifndef TANDEM_CRYPTO_SIGN_ED25519_H_
#define TANDEM_CRYPTO_SIGN_ED25519_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/random.h"

namespace tandem::crypto {
namespace internal::ed25519 {
struct PublicKeyTable;  // crypto/sign/edwards25519.h
struct ExpandedKey;     // crypto/sign/edwards25519.h
}  // namespace internal::ed25519

inline constexpr size_t kEd25519SeedSize = 32;       // RFC 8032 private key
inline constexpr size_t kEd25519PublicKeySize = 32;  // encoded point A
inline constexpr size_t kEd25519SignatureSize = 64;  // R || S

class Ed25519VerifyingKey {
 public:
  // `raw`: the 32-byte encoded public key of RFC 8032 section 5.1.5.
  // INVALID_ARGUMENT unless it is exactly 32 bytes and decodes (section
  // 5.1.3, canonical y < p) to a point that is not of small order (order 1,
  // 2, 4 or 8: such keys admit signatures valid for any message).
  // About 4 us (a square root and 8 odd multiples of -A for verification).
  static absl::StatusOr<Ed25519VerifyingKey> FromRaw(absl::string_view raw);
  // `pem`: a SubjectPublicKeyInfo PEM ("-----BEGIN PUBLIC KEY-----") as
  // written by `openssl pkey -pubout`. INVALID_ARGUMENT if it does not parse,
  // is not Ed25519, or the key fails FromRaw's checks.
  static absl::StatusOr<Ed25519VerifyingKey> FromPem(absl::string_view pem);

  Ed25519VerifyingKey(const Ed25519VerifyingKey&) = default;
  Ed25519VerifyingKey& operator=(const Ed25519VerifyingKey&) = default;
  Ed25519VerifyingKey(Ed25519VerifyingKey&&) noexcept = default;
  Ed25519VerifyingKey& operator=(Ed25519VerifyingKey&&) noexcept = default;
  ~Ed25519VerifyingKey() = default;

  // OK iff `signature` is a valid Ed25519 signature of `message` under this
  // key (RFC 8032 5.1.7, cofactorless, S < L required). UNAUTHENTICATED
  // otherwise: a signature that is not exactly 64 bytes, one that does not
  // verify, or an empty (moved-from) key. INTERNAL only when OpenSSL's
  // SHA-512 fails.
  absl::Status Verify(absl::string_view message, absl::string_view signature) const;

  // The 32-byte encoded public key.
  const std::string& Raw() const { return raw_; }
  // SubjectPublicKeyInfo PEM, loadable by FromPem and `openssl pkey -pubin`.
  // INTERNAL on OpenSSL failure or for a moved-from key.
  absl::StatusOr<std::string> Pem() const;

 private:
  Ed25519VerifyingKey(std::shared_ptr<const internal::ed25519::PublicKeyTable> table,
                      std::string raw)
      : table_(std::move(table)), raw_(std::move(raw)) {}

  std::shared_ptr<const internal::ed25519::PublicKeyTable> table_;
  std::string raw_;
};

class Ed25519SigningKey {
 public:
  // `seed`: the 32-byte RFC 8032 private key. INVALID_ARGUMENT unless 32 bytes.
  static absl::StatusOr<Ed25519SigningKey> FromSeed(absl::string_view seed);
  // `pem`: an unencrypted PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----") as
  // written by `openssl genpkey -algorithm ed25519`. INVALID_ARGUMENT if it
  // does not parse (encrypted PEMs are refused, never prompted for) or is not
  // an Ed25519 key.
  static absl::StatusOr<Ed25519SigningKey> FromPem(absl::string_view pem);
  // A fresh key from 32 bytes of `rng` (OpenSslRandom::Default() in
  // production). INVALID_ARGUMENT for a null rng; rng errors propagate.
  static absl::StatusOr<Ed25519SigningKey> Generate(SecureRandom* rng);

  Ed25519SigningKey(const Ed25519SigningKey&) = default;
  Ed25519SigningKey& operator=(const Ed25519SigningKey&) = default;
  Ed25519SigningKey(Ed25519SigningKey&&) noexcept = default;
  Ed25519SigningKey& operator=(Ed25519SigningKey&&) noexcept = default;
  ~Ed25519SigningKey() = default;

  // The 32-byte encoded public key.
  const std::string& PublicKeyRaw() const { return public_raw_; }
  // SubjectPublicKeyInfo PEM of the public key (what `openssl pkey -pubout`
  // writes). INTERNAL on OpenSSL failure or for a moved-from key.
  absl::StatusOr<std::string> PublicKeyPem() const;
  // Unencrypted PKCS#8 PEM of the private key (what `openssl genpkey`
  // writes). Secret: never log it. INTERNAL on failure / moved-from key.
  absl::StatusOr<std::string> PrivateKeyPem() const;
  // The verifying key of this key. INTERNAL on failure / moved-from key.
  absl::StatusOr<Ed25519VerifyingKey> VerifyingKey() const;

  // The 64-byte signature of `message` (deterministic, RFC 8032 5.1.6).
  // INTERNAL on OpenSSL failure or for a moved-from key.
  absl::StatusOr<std::string> Sign(absl::string_view message) const;

 private:
  Ed25519SigningKey(std::shared_ptr<const internal::ed25519::ExpandedKey> key,
                    std::string public_raw)
      : key_(std::move(key)), public_raw_(std::move(public_raw)) {}

  std::shared_ptr<const internal::ed25519::ExpandedKey> key_;
  std::string public_raw_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_SIGN_ED25519_H_
