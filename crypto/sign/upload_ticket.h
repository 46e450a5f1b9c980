// Upload tickets: the coordinator's Ed25519-signed permission for one client
// to upload one report to one round (ARCHITECTURE.md "Trust model").
//
//   coordinator: SignUploadTicket(key, {task, round, ticket_id, expiry})
//                -> SignedUploadTicket, handed to the client in CheckIn
//   aggregator:  VerifyUploadTicket(coordinator_key, request.ticket())
//                CheckTicketFor(ticket, request.task_id(), request.round_id(),
//                               request.report_id(), now)
//
// The signature covers "tandem.upload_ticket.v1" || 0x00 || ticket, where
// `ticket` is the deterministic serialization of the UploadTicket and is
// carried verbatim in SignedUploadTicket.ticket: the verifier checks exactly
// the bytes it parses. The ticket id is the report id, so the aggregators'
// one-report-per-id replay protection is one report per ticket; a ticket is
// bound to its task and round, so it cannot be replayed into another round.
//
// Pure functions; thread-safe (the keys are, see ed25519.h).
#ifndef TANDEM_CRYPTO_SIGN_UPLOAD_TICKET_H_
#define TANDEM_CRYPTO_SIGN_UPLOAD_TICKET_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "crypto/sign/ed25519.h"
#include "proto/aggregator.pb.h"

namespace tandem::crypto {

// Domain separation tag of the ticket signature (followed by one 0x00 byte).
inline constexpr absl::string_view kUploadTicketDomain = "tandem.upload_ticket.v1";
// Length of UploadTicket.ticket_id (== the report id).
inline constexpr size_t kUploadTicketIdSize = 16;
// Serialized tickets longer than this are refused unverified (a real one is
// under 128 bytes; this bounds the work an unauthenticated caller can cause).
inline constexpr size_t kMaxUploadTicketBytes = 1024;

// The message that is signed: kUploadTicketDomain || 0x00 || ticket_bytes.
std::string UploadTicketSigningInput(absl::string_view ticket_bytes);

// Length of SignedUploadTicket.key_id.
inline constexpr size_t kTicketKeyIdSize = 8;

// The id of a coordinator ticket key: the first 8 bytes of SHA-256 of its
// 32-byte raw public key. Not secret; it only tells a verifier holding
// several keys (rotation with overlap) which one to check the signature with.
std::string TicketKeyId(absl::string_view public_key_raw);

// Serializes `ticket` deterministically, signs it and names the key
// (SignedUploadTicket.key_id = TicketKeyId(key)). INVALID_ARGUMENT for a
// ticket no aggregator would accept: empty task_id, ticket_id not 16 bytes,
// expiry_unix_ms <= 0 (tickets must expire), or too large. INTERNAL on
// serialization or signing failure.
absl::StatusOr<proto::SignedUploadTicket> SignUploadTicket(const Ed25519SigningKey& key,
                                                           const proto::UploadTicket& ticket);

// Verifies the signature over `signed_ticket.ticket` and parses it. Returns
// UNAUTHENTICATED (never INVALID_ARGUMENT) for a key_id that is not `key`'s
// (or missing), a missing, truncated or wrong signature, oversized or unparsable ticket bytes, a
// ticket_id that is not 16 bytes or an empty task_id. The signature is checked before the bytes are
// parsed. Does NOT check task, round, report id or expiry: see CheckTicketFor.
// INTERNAL only when OpenSSL cannot allocate.
absl::StatusOr<proto::UploadTicket> VerifyUploadTicket(
    const Ed25519VerifyingKey& key, const proto::SignedUploadTicket& signed_ticket);

// The same with several accepted keys (the current one and those being
// rotated out): the key is chosen by key_id, one signature check whatever
// the number of keys. UNAUTHENTICATED naming the id for a key_id none of
// `keys` has. Null entries are skipped.
absl::StatusOr<proto::UploadTicket> VerifyUploadTicketWithAnyOf(
    absl::Span<const Ed25519VerifyingKey* const> keys,
    const proto::SignedUploadTicket& signed_ticket);

// OK iff the (verified) `ticket` is for `task_id`, `round_id` and `report_id`
// (report_id == ticket_id) and has not expired (now_unix_ms - skew_ms <=
// expiry_unix_ms: the expiry is on the issuer's clock, `now_unix_ms` on the
// checker's, which may run up to `skew_ms` ahead; the refusal names the
// tolerance when there is one). UNAUTHENTICATED otherwise, also for
// expiry_unix_ms <= 0 ("no expiry" is not accepted) or a malformed ticket.
absl::Status CheckTicketFor(const proto::UploadTicket& ticket, absl::string_view task_id,
                            uint64_t round_id, absl::string_view report_id, int64_t now_unix_ms,
                            int64_t skew_ms = 0);

// SHA-256 of `bytes`, 32 raw bytes (the digest of a ticket, of a dense
// share's stored blob, of a device key). CHECK-fails only if OpenSSL itself
// is broken (no provider, no memory).
std::string Sha256Digest(absl::string_view bytes);

// SHA-256 of `signed_ticket.ticket` (the signed bytes), 32 bytes. Independent
// of the signature encoding, so it identifies the ticket itself.
std::string TicketDigest(const proto::SignedUploadTicket& signed_ticket);

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_SIGN_UPLOAD_TICKET_H_
