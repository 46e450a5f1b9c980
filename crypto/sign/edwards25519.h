// edwards25519 arithmetic for Ed25519 (RFC 8032 section 5.1): field
// elements in radix 2^51 (edwards25519_arith.h), extended twisted Edwards
// coordinates (Hisil-Wong-Carter-Dawson 2008, a = -1), Barrett reduction
// modulo the group order L.
//
// Verification (DecodePublicKey, VerifySignature; edwards25519.cc) handles
// public data only (keys, signatures, messages), so it branches and indexes
// tables on its inputs: width-5 and width-8 NAF double scalar
// multiplication. Signing (ExpandSeed, Sign; edwards25519_sign.cc) handles
// the secret scalar and nonce in constant time: a fixed sequence of 64
// additions of points selected from a fixed-base table by masked scans, no
// branch or index on a secret.
//
// Why not OpenSSL's: on the machine of bench/README OpenSSL 3.0's EVP
// Ed25519 verifies in 83 us and signs in 33 us (an EVP context, key lookups
// and a generic implementation per call); the aggregators verify two
// signatures a report each and a device signs three, which made them about
// 10 % of a private round's CPU. Correctness is checked against OpenSSL
// (byte-identical signatures, the same verdicts on valid and tampered
// ones), BIGNUM and RFC 8032's vectors (edwards25519_test.cc,
// ed25519_test.cc).
//
// Thread safety: PublicKeyTable and ExpandedKey are immutable once built;
// VerifySignature and Sign may run concurrently on one key; the fixed-base
// tables are built once on first use (function-local statics).
#ifndef TANDEM_CRYPTO_SIGN_EDWARDS25519_H_
#define TANDEM_CRYPTO_SIGN_EDWARDS25519_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::crypto::internal::ed25519 {

// A decoded public key A: its 32-byte encoding (hashed into every challenge)
// and the odd multiples -A, -3A, ..., -15A for the width-5 NAF of the
// challenge. Opaque outside edwards25519.cc.
struct PublicKeyTable;

// RFC 8032 section 5.1.3 decoding of a 32-byte public key, stricter than the
// RFC's "MAY accept" cases: INVALID_ARGUMENT unless `raw` is 32 bytes, y is
// canonical (< p), (x, y) is on the curve, x = 0 comes with sign bit 0, and
// the point is not of small order (order 1, 2, 4 or 8: such a key admits
// signatures valid for any message). The message names the reason ("not
// canonical", "not a point", "sign bit", "small order").
absl::StatusOr<std::shared_ptr<const PublicKeyTable>> DecodePublicKey(absl::string_view raw);

// RFC 8032 section 5.1.7, cofactorless: OK iff `signature` = R || S (64
// bytes) has S < L and the encoding of [S]B - [SHA-512(R || A || M) mod L]A
// equals R byte for byte (so a non-canonical R never verifies).
// UNAUTHENTICATED otherwise; INTERNAL only if OpenSSL's SHA-512 fails.
absl::Status VerifySignature(const PublicKeyTable& key, absl::string_view message,
                             absl::string_view signature);

// The expanded private key of RFC 8032 section 5.1.5. Secret: wiped when
// destroyed; never copied by this file's functions.
struct ExpandedKey {
  ExpandedKey() = default;
  ExpandedKey(const ExpandedKey&) = delete;
  ExpandedKey& operator=(const ExpandedKey&) = delete;
  ~ExpandedKey();

  uint8_t seed[32];        // the RFC's private key (kept for PEM export)
  uint8_t scalar[32];      // s: SHA-512(seed)'s first half, clamped
  uint8_t prefix[32];      // SHA-512(seed)'s second half
  uint8_t public_key[32];  // encode([s]B)
};

// Fills `out` from a 32-byte seed, in constant time (edwards25519_sign.cc).
// INVALID_ARGUMENT unless 32 bytes; INTERNAL only if OpenSSL's SHA-512 fails.
absl::Status ExpandSeed(absl::string_view seed, ExpandedKey* out);

// RFC 8032 section 5.1.6 (deterministic) signature of `message` into
// `signature` (64 bytes), in time independent of the key and of r (it
// depends on the message's length only). INTERNAL only if SHA-512 fails.
absl::Status Sign(const ExpandedKey& key, absl::string_view message, uint8_t signature[64]);

// x mod L for a 64-byte little-endian x (the challenge's reduction), as 32
// little-endian bytes, in constant time (the signer reduces its nonce and
// S here). Exposed for its property test against BIGNUM.
std::array<uint8_t, 32> ReduceModOrder(const std::array<uint8_t, 64>& x);

}  // namespace tandem::crypto::internal::ed25519

#endif  // TANDEM_CRYPTO_SIGN_EDWARDS25519_H_
