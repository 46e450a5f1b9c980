// Variable-time edwards25519 arithmetic for Ed25519 verification (RFC 8032
// section 5.1): field elements in radix 2^51, extended twisted Edwards
// coordinates (Hisil-Wong-Carter-Dawson 2008, a = -1), width-w NAF double
// scalar multiplication, Barrett reduction modulo the group order L.
//
// Everything here handles public data only (public keys, signatures,
// messages), so it branches and indexes tables on its inputs. Never use it
// with a secret: signing stays with OpenSSL (crypto/sign/ed25519.cc).
//
// Why not OpenSSL's verification: OpenSSL 3.0 verifies with radix-2^25.5
// field arithmetic and builds an EVP context per call, 81-86 us a signature
// on the machine of bench/README; the aggregators verify two signatures a
// report each (the coordinator's ticket, the device's upload), which made
// them 7 % of a private round's CPU. Correctness is checked against OpenSSL
// on random and tampered signatures and RFC 8032's vectors
// (edwards25519_test.cc).
//
// Thread safety: Ed25519PublicKeyTable is immutable after DecodePublicKey;
// VerifySignature may run concurrently on one table. The base point's table
// is built once on first use (a function-local static).
#ifndef TANDEM_CRYPTO_SIGN_EDWARDS25519_H_
#define TANDEM_CRYPTO_SIGN_EDWARDS25519_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::crypto::internal {

// A decoded public key A: its 32-byte encoding (hashed into every challenge)
// and the odd multiples -A, -3A, ..., -15A for the width-5 NAF of the
// challenge. Opaque outside edwards25519.cc.
struct Ed25519PublicKeyTable;

// RFC 8032 section 5.1.3 decoding of a 32-byte public key, stricter than the
// RFC's "MAY accept" cases: INVALID_ARGUMENT unless `raw` is 32 bytes, y is
// canonical (< p), (x, y) is on the curve, x = 0 comes with sign bit 0, and
// the point is not of small order (order 1, 2, 4 or 8: such a key admits
// signatures valid for any message). The message names the reason ("not
// canonical", "not a point", "sign bit", "small order").
absl::StatusOr<std::shared_ptr<const Ed25519PublicKeyTable>> DecodePublicKey(absl::string_view raw);

// RFC 8032 section 5.1.7, cofactorless: OK iff `signature` = R || S (64
// bytes) has S < L and the encoding of [S]B - [SHA-512(R || A || M) mod L]A
// equals R byte for byte (so a non-canonical R never verifies).
// UNAUTHENTICATED otherwise; INTERNAL only if OpenSSL's SHA-512 fails.
absl::Status VerifySignature(const Ed25519PublicKeyTable& key, absl::string_view message,
                             absl::string_view signature);

// x mod L for a 64-byte little-endian x (the challenge's reduction), as 32
// little-endian bytes. Exposed for its property test against BIGNUM.
std::array<uint8_t, 32> ReduceModOrder(const std::array<uint8_t, 64>& x);

}  // namespace tandem::crypto::internal

#endif  // TANDEM_CRYPTO_SIGN_EDWARDS25519_H_
