// Device identity (ARCHITECTURE.md "Trust model", client row): every device
// holds its own Ed25519 key; what it signs and what the servers verify.
//
//   device:       id = DeviceId(key.PublicKeyRaw())
//                 SignCheckIn(key, &request)            (CheckIn)
//                 SignUpload(key, role, &upload)        (each upload)
//   coordinator:  VerifyCheckIn(request, now, max_skew) (before any state)
//                 VerifyEnrollmentToken(keys, token)    (an unenrolled key)
//   aggregators:  VerifyUploadSignature(ticket, role, content digest, sig)
//   operator:     MintEnrollmentToken(operator key, token)
//
// Every signature covers a domain tag, a 0x00 byte and a length-prefixed
// encoding of its fields (8-byte little-endian lengths and integers), so no
// signature of one kind verifies as another and no field can bleed into the
// next. The design follows NVIDIA FLARE's per-site keys and Flower's
// SuperNode key allow-list [I]: the id is a hash of the key, so an id cannot
// be claimed without the key, and both aggregators check each upload against
// the key the ticket names (the coordinator saw it prove possession).
//
// The upload's content digest (v2) of a PREAMBLE share is
//   SHA-256("tandem.upload.content.v2" || 0x00 || P || the deterministic
//           serialization of proto::StoredReportShare {key_share with only
//           each key's party and seed, norm_proof (if any), ticket_digest})
// where P = crypto::PublicPartsDigest(key_share) (crypto/dpf/public_digest.h)
// covers the correction words, value corrections and proof corrections,
// the bulk of the share, which the servers' VDPF digest hashes through the
// same P: an aggregator hashes each share's bytes once for both (issue 36).
// Of a dense share it is SHA-256 of the serialization of StoredReportShare
// {dense_share, norm_proof, ticket_digest}. Either way it is the digest the
// aggregators keep of what they store (aggregator/store/report_store.h
// ShareDigest), so verifying costs them one Ed25519 check and no extra pass.
//
// Pure functions; thread-safe. Error codes: UNAUTHENTICATED for anything a
// verifier refuses (bad signature, stale timestamp, wrong key or id,
// malformed fields), INVALID_ARGUMENT for a signer's bad input, INTERNAL
// for OpenSSL failures.
#ifndef TANDEM_CRYPTO_SIGN_DEVICE_AUTH_H_
#define TANDEM_CRYPTO_SIGN_DEVICE_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "crypto/dpf/public_digest.h"
#include "crypto/sign/ed25519.h"
#include "proto/aggregator.pb.h"
#include "proto/coordinator.pb.h"

namespace tandem::crypto {

inline constexpr absl::string_view kDeviceIdDomain = "tandem.device_id.v1";
inline constexpr absl::string_view kCheckInDomain = "tandem.checkin.v1";
inline constexpr absl::string_view kDeviceUploadDomain = "tandem.device_upload.v1";
inline constexpr absl::string_view kEnrollmentTokenDomain = "tandem.enrollment_token.v1";
inline constexpr size_t kCheckInNonceSize = 16;
inline constexpr size_t kEnrollmentTokenIdSize = 16;
// Serialized tokens longer than this are refused unverified.
inline constexpr size_t kMaxEnrollmentTokenBytes = 512;

// Which aggregator an upload is for; part of what the device signs, so a
// signed upload to one server is no signed upload to the other.
enum class UploadRole : uint8_t { kLeader = 0, kHelper = 1 };

// "dev-" and the lowercase hex of the first 16 bytes of SHA-256(
// kDeviceIdDomain || 0x00 || public_key_raw): 36 characters of the client id
// alphabet. Deterministic; any 32-byte string maps to one id.
std::string DeviceId(absl::string_view public_key_raw);

// What a check-in signature covers: every field of `request` but the
// signature (client id, task id, public key, timestamp, nonce and the
// enrollment token's signed bytes and signature).
std::string CheckInSigningInput(const proto::CheckInRequest& request);

// Fills client_id (DeviceId), device_public_key, timestamp_unix_ms, a fresh
// nonce (from `nonce`, 16 bytes) and the signature. task_id and
// enrollment_token are taken as set by the caller. INVALID_ARGUMENT for a
// nonce that is not 16 bytes or a timestamp <= 0.
absl::Status SignCheckIn(const Ed25519SigningKey& key, int64_t now_unix_ms, absl::string_view nonce,
                         proto::CheckInRequest* request);

// The device's verified key, when the request's signature verifies under
// its device_public_key, client_id == DeviceId(that key), the nonce is 16
// bytes and |timestamp - now| <= max_skew_ms. UNAUTHENTICATED otherwise
// (the message names which check failed). Does not check enrollment or
// replay (the coordinator's registry does).
absl::StatusOr<Ed25519VerifyingKey> VerifyCheckIn(const proto::CheckInRequest& request,
                                                  int64_t now_unix_ms, int64_t max_skew_ms);
// VerifyCheckIn's checks short of the signature (sizes, enrollment token
// within its bound, client id = the key's id, timestamp within the skew): a SHA-256 and no curve
// arithmetic, for refusing malformed requests cheaply. UNAUTHENTICATED.
absl::Status CheckCheckInForm(const proto::CheckInRequest& request, int64_t now_unix_ms,
                              int64_t max_skew_ms);
// The same with the key of an enrolled device already parsed (`known_key`,
// used when it is the request's key; null or another key: parsed and
// checked from the request), which saves FromRaw's point checks.
absl::StatusOr<Ed25519VerifyingKey> VerifyCheckIn(const proto::CheckInRequest& request,
                                                  const Ed25519VerifyingKey* known_key,
                                                  int64_t now_unix_ms, int64_t max_skew_ms);

// The deterministic serialization of StoredReportShare{key_share = *keys
// (null: unset), norm_proof = *proof (null: unset), ticket_digest,
// dense_share = *dense (null: unset)}, written field by field from the
// caller's messages: the same bytes as building that message and
// serializing it, without copying the ~100 KB-1 MB submessages into it
// first. Thread-safe (reads its arguments only).
std::string StoredReportShareBytes(const proto::SparseKeySet* keys,
                                   const proto::NormProofShare* proof,
                                   absl::string_view ticket_digest, const proto::DenseShare* dense);

// SHA-256 of the deterministic serialization of StoredReportShare{keys,
// proof (null: unset), ticket_digest}; see the file comment.
// `public_digest`: PublicPartsDigest(keys) when the caller has it (null:
// computed here).
std::string UploadContentDigest(const proto::SparseKeySet& keys, const proto::NormProofShare* proof,
                                absl::string_view ticket_digest,
                                const ProofDigest* public_digest = nullptr);
// The content digest of an upload of either encoding: the above for a
// key_share, and for a dense_share the same over StoredReportShare{
// dense_share, proof, ticket_digest} (the blob the aggregator stores).
std::string UploadContentDigestOf(const proto::UploadRequest& upload,
                                  absl::string_view ticket_digest,
                                  const ProofDigest* public_digest = nullptr);

// kDeviceUploadDomain || 0x00 || role || ticket digest || content digest
// (each digest length-prefixed).
std::string UploadSigningInput(UploadRole role, absl::string_view ticket_digest,
                               absl::string_view content_digest);

// Sets upload->device_signature over the upload's own ticket and share.
// INVALID_ARGUMENT when the upload has no ticket or its ticket names another
// key than `key`'s (a device never signs for someone else's ticket).
absl::Status SignUpload(const Ed25519SigningKey& key, UploadRole role, proto::UploadRequest* upload,
                        const ProofDigest* public_digest = nullptr);
// Both uploads of one report (leader, then helper): as SignUpload twice,
// with P hashed once when both key shares carry the same public parts, or
// not at all when the caller has it: `public_digest`, when not null, must
// be P of to_leader's key share (the norm proof computed it:
// NormProofSystem::Prove); a wrong one only makes both servers refuse the
// signatures.
absl::Status SignUploadPair(const Ed25519SigningKey& key, proto::UploadRequest* to_leader,
                            proto::UploadRequest* to_helper,
                            const ProofDigest* public_digest = nullptr);

// OK iff `signature` is the device's signature for this server's `role`, the
// ticket (`ticket_digest`, crypto::TicketDigest) and `content_digest` under
// ticket.device_public_key. UNAUTHENTICATED otherwise, also for a ticket that
// names no (or a malformed) device key.
absl::Status VerifyUploadSignature(const proto::UploadTicket& ticket, UploadRole role,
                                   absl::string_view ticket_digest,
                                   absl::string_view content_digest, absl::string_view signature);

// Signs an enrollment token. INVALID_ARGUMENT for a token id that is not 16
// bytes, expiry <= 0, a device key that is set but not 32 bytes, or an
// issuer outside [A-Za-z0-9._-]{0,64}.
absl::StatusOr<proto::SignedEnrollmentToken> MintEnrollmentToken(
    const Ed25519SigningKey& operator_key, const proto::EnrollmentToken& token);

// The token, when its signature verifies under one of `operator_keys` and it
// is well formed and unexpired at now_unix_ms. UNAUTHENTICATED otherwise
// (signature checked before the bytes are parsed). Does not check single
// use (the coordinator's store does) nor the device key (the caller does).
absl::StatusOr<proto::EnrollmentToken> VerifyEnrollmentToken(
    const std::vector<Ed25519VerifyingKey>& operator_keys,
    const proto::SignedEnrollmentToken& signed_token, int64_t now_unix_ms);

// Text form of a signed token for files, flags and app backends:
// "tdmenroll1." followed by unpadded base64url of its serialization.
std::string EncodeEnrollmentToken(const proto::SignedEnrollmentToken& token);
// INVALID_ARGUMENT for text that is not such a string (or too long).
absl::StatusOr<proto::SignedEnrollmentToken> DecodeEnrollmentToken(absl::string_view text);

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_SIGN_DEVICE_AUTH_H_
