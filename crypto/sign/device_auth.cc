#include "crypto/sign/device_auth.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dpf/internal/sha256.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::crypto {
namespace {

constexpr absl::string_view kTokenTextPrefix = "tdmenroll1.";
constexpr absl::string_view kUploadContentDomain = "tandem.upload.content.v2";

void AppendU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void AppendField(absl::string_view field, std::string* out) {
  AppendU64(field.size(), out);
  out->append(field.data(), field.size());
}

std::string Domain(absl::string_view tag) {
  std::string s(tag);
  s.push_back('\0');
  return s;
}

absl::StatusOr<std::string> Deterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  out.resize(m.ByteSizeLong());
  google::protobuf::io::ArrayOutputStream stream(out.data(), static_cast<int>(out.size()));
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeWithCachedSizes(&coded);
  if (coded.HadError()) return absl::InternalError("cannot serialize");
  return out;
}

bool IsIssuer(absl::string_view s) {
  if (s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckToken(const proto::EnrollmentToken& t, absl::StatusCode code) {
  if (t.token_id().size() != kEnrollmentTokenIdSize) {
    return absl::Status(code, absl::StrCat("enrollment token id must be ", kEnrollmentTokenIdSize,
                                           " bytes, got ", t.token_id().size()));
  }
  if (t.expiry_unix_ms() <= 0) return absl::Status(code, "enrollment token has no expiry");
  if (!t.device_public_key().empty() && t.device_public_key().size() != kEd25519PublicKeySize) {
    return absl::Status(code, "enrollment token's device_public_key must be 32 bytes");
  }
  if (!IsIssuer(t.issuer())) {
    return absl::Status(code, "enrollment token's issuer must be [A-Za-z0-9._-]{0,64}");
  }
  return absl::OkStatus();
}

}  // namespace

std::string DeviceId(absl::string_view public_key_raw) {
  std::string input = Domain(kDeviceIdDomain);
  input.append(public_key_raw.data(), public_key_raw.size());
  return absl::StrCat("dev-", absl::BytesToHexString(Sha256Digest(input).substr(0, 16)));
}

std::string CheckInSigningInput(const proto::CheckInRequest& request) {
  std::string input = Domain(kCheckInDomain);
  AppendField(request.client_id(), &input);
  AppendField(request.task_id(), &input);
  AppendField(request.device_public_key(), &input);
  AppendU64(static_cast<uint64_t>(request.timestamp_unix_ms()), &input);
  AppendField(request.nonce(), &input);
  AppendField(request.enrollment_token().token(), &input);
  AppendField(request.enrollment_token().signature(), &input);
  return input;
}

absl::Status SignCheckIn(const Ed25519SigningKey& key, int64_t now_unix_ms, absl::string_view nonce,
                         proto::CheckInRequest* request) {
  if (nonce.size() != kCheckInNonceSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("check-in nonce must be ", kCheckInNonceSize, " bytes"));
  }
  if (now_unix_ms <= 0) return absl::InvalidArgumentError("check-in timestamp must be > 0");
  request->set_client_id(DeviceId(key.PublicKeyRaw()));
  request->set_device_public_key(key.PublicKeyRaw());
  request->set_timestamp_unix_ms(now_unix_ms);
  request->set_nonce(std::string(nonce));
  request->clear_signature();
  TANDEM_ASSIGN_OR_RETURN(std::string sig, key.Sign(CheckInSigningInput(*request)));
  request->set_signature(std::move(sig));
  return absl::OkStatus();
}

absl::StatusOr<Ed25519VerifyingKey> VerifyCheckIn(const proto::CheckInRequest& request,
                                                  int64_t now_unix_ms, int64_t max_skew_ms) {
  return VerifyCheckIn(request, nullptr, now_unix_ms, max_skew_ms);
}

absl::Status CheckCheckInForm(const proto::CheckInRequest& request, int64_t now_unix_ms,
                              int64_t max_skew_ms) {
  if (request.device_public_key().size() != kEd25519PublicKeySize) {
    return absl::UnauthenticatedError("check-in needs the device's 32-byte Ed25519 public key");
  }
  if (request.nonce().size() != kCheckInNonceSize) {
    return absl::UnauthenticatedError("check-in nonce must be 16 bytes");
  }
  if (request.signature().size() != kEd25519SignatureSize) {
    return absl::UnauthenticatedError("check-in signature must be 64 bytes");
  }
  if (request.enrollment_token().token().size() > kMaxEnrollmentTokenBytes ||
      request.enrollment_token().signature().size() > kEd25519SignatureSize) {
    return absl::UnauthenticatedError("enrollment token is oversized");
  }
  if (request.client_id() != DeviceId(request.device_public_key())) {
    return absl::UnauthenticatedError("client_id is not the id of the device key");
  }
  const int64_t skew = request.timestamp_unix_ms() - now_unix_ms;
  if (request.timestamp_unix_ms() <= 0 || skew > max_skew_ms || skew < -max_skew_ms) {
    return absl::UnauthenticatedError(
        absl::StrCat("check-in timestamp is ", skew, " ms off this server's clock (at most ",
                     max_skew_ms, " accepted): check the device's clock"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Ed25519VerifyingKey> VerifyCheckIn(const proto::CheckInRequest& request,
                                                  const Ed25519VerifyingKey* known_key,
                                                  int64_t now_unix_ms, int64_t max_skew_ms) {
  TANDEM_RETURN_IF_ERROR(CheckCheckInForm(request, now_unix_ms, max_skew_ms));
  absl::StatusOr<Ed25519VerifyingKey> key =
      known_key != nullptr && known_key->Raw() == request.device_public_key()
          ? absl::StatusOr<Ed25519VerifyingKey>(*known_key)
          : Ed25519VerifyingKey::FromRaw(request.device_public_key());
  if (!key.ok()) return absl::UnauthenticatedError("device public key is not a valid Ed25519 key");
  if (absl::Status s = key->Verify(CheckInSigningInput(request), request.signature()); !s.ok()) {
    return absl::UnauthenticatedError("check-in signature does not verify under the device key");
  }
  return *std::move(key);
}

namespace {

// A length-delimited field's tag, length and body size on the wire.
size_t DelimitedSize(size_t body) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(body) + body;
}

}  // namespace

// Deterministic serialization writes the set fields in field-number order
// (key_share = 1, norm_proof = 2, ticket_digest = 3, dense_share = 4; a
// message field is written when set, even empty; proto3 bytes only when
// non-empty), each submessage as tag, length and its own deterministic
// bytes: exactly what this writes. Field numbers below 16: one-byte tags.
std::string StoredReportShareBytes(const proto::SparseKeySet* keys,
                                   const proto::NormProofShare* proof,
                                   absl::string_view ticket_digest,
                                   const proto::DenseShare* dense) {
  using google::protobuf::internal::WireFormatLite;
  const size_t keys_size = keys != nullptr ? keys->ByteSizeLong() : 0;  // caches sizes
  const size_t proof_size = proof != nullptr ? proof->ByteSizeLong() : 0;
  const size_t dense_size = dense != nullptr ? dense->ByteSizeLong() : 0;
  const size_t total = (keys != nullptr ? DelimitedSize(keys_size) : 0) +
                       (proof != nullptr ? DelimitedSize(proof_size) : 0) +
                       (!ticket_digest.empty() ? DelimitedSize(ticket_digest.size()) : 0) +
                       (dense != nullptr ? DelimitedSize(dense_size) : 0);
  std::string out(total, '\0');
  google::protobuf::io::ArrayOutputStream stream(out.data(), static_cast<int>(total));
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  const auto header = [&](int field, size_t size) {
    coded.WriteTag(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint64(size);
  };
  if (keys != nullptr) {
    header(proto::StoredReportShare::kKeyShareFieldNumber, keys_size);
    keys->SerializeWithCachedSizes(&coded);
  }
  if (proof != nullptr) {
    header(proto::StoredReportShare::kNormProofFieldNumber, proof_size);
    proof->SerializeWithCachedSizes(&coded);
  }
  if (!ticket_digest.empty()) {
    header(proto::StoredReportShare::kTicketDigestFieldNumber, ticket_digest.size());
    coded.WriteRaw(ticket_digest.data(), static_cast<int>(ticket_digest.size()));
  }
  if (dense != nullptr) {
    header(proto::StoredReportShare::kDenseShareFieldNumber, dense_size);
    dense->SerializeWithCachedSizes(&coded);
  }
  return out;
}

std::string UploadContentDigest(const proto::SparseKeySet& keys, const proto::NormProofShare* proof,
                                absl::string_view ticket_digest, const ProofDigest* public_digest) {
  ProofDigest p;
  if (public_digest != nullptr) {
    p = *public_digest;
  } else {
    absl::StatusOr<ProofDigest> computed = PublicPartsDigest(keys);
    if (!computed.ok()) return std::string();  // OpenSSL failure: matches nothing
    p = *computed;
  }
  // The key set without its public parts (P stands for them): parameters,
  // group count and each key's party and seed, a few hundred bytes.
  proto::SparseKeySet rest;
  *rest.mutable_group_parameters() = keys.group_parameters();
  rest.set_num_groups(keys.num_groups());
  for (const proto::BlockDpfKey& key : keys.keys()) {
    proto::BlockDpfKey* k = rest.add_keys();
    k->set_party(key.party());
    k->set_seed(key.seed());
  }
  // Hashed in three parts: the rest (the leader's holds its 128 KB witness
  // share at d = 1) is not copied behind the domain and P first.
  absl::StatusOr<internal::Sha256> sha = internal::Sha256::Create();
  const std::string domain = Domain(kUploadContentDomain);
  const std::string rest_bytes = StoredReportShareBytes(&rest, proof, ticket_digest, nullptr);
  const auto bytes = [](absl::string_view s) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  if (!sha.ok() || !sha->Update(bytes(domain)).ok() || !sha->Update(p).ok() ||
      !sha->Update(bytes(rest_bytes)).ok()) {
    return std::string();  // OpenSSL failure: matches nothing
  }
  absl::StatusOr<ProofDigest> digest = sha->Finish();
  if (!digest.ok()) return std::string();
  return std::string(reinterpret_cast<const char*>(digest->data()), digest->size());
}

std::string UploadContentDigestOf(const proto::UploadRequest& upload,
                                  absl::string_view ticket_digest,
                                  const ProofDigest* public_digest) {
  const proto::NormProofShare* proof = upload.has_norm_proof() ? &upload.norm_proof() : nullptr;
  if (upload.has_dense_share()) {
    return Sha256Digest(
        StoredReportShareBytes(nullptr, proof, ticket_digest, &upload.dense_share()));
  }
  return UploadContentDigest(upload.key_share(), proof, ticket_digest, public_digest);
}

std::string UploadSigningInput(UploadRole role, absl::string_view ticket_digest,
                               absl::string_view content_digest) {
  std::string input = Domain(kDeviceUploadDomain);
  input.push_back(static_cast<char>(role));
  AppendField(ticket_digest, &input);
  AppendField(content_digest, &input);
  return input;
}

absl::Status SignUpload(const Ed25519SigningKey& key, UploadRole role, proto::UploadRequest* upload,
                        const ProofDigest* public_digest) {
  if (!upload->has_ticket()) return absl::InvalidArgumentError("upload has no ticket to sign for");
  proto::UploadTicket ticket;
  if (!ticket.ParseFromString(upload->ticket().ticket())) {
    return absl::InvalidArgumentError("upload ticket does not parse");
  }
  if (ticket.device_public_key() != key.PublicKeyRaw()) {
    return absl::InvalidArgumentError("the upload ticket was issued to another device key");
  }
  const std::string ticket_digest = TicketDigest(upload->ticket());
  const std::string content = UploadContentDigestOf(*upload, ticket_digest, public_digest);
  if (content.empty()) return absl::InternalError("cannot hash the upload's public parts");
  TANDEM_ASSIGN_OR_RETURN(std::string sig,
                          key.Sign(UploadSigningInput(role, ticket_digest, content)));
  upload->set_device_signature(std::move(sig));
  return absl::OkStatus();
}

absl::Status SignUploadPair(const Ed25519SigningKey& key, proto::UploadRequest* to_leader,
                            proto::UploadRequest* to_helper, const ProofDigest* public_digest) {
  if (!to_leader->has_key_share() || !to_helper->has_key_share() ||
      !SamePublicParts(to_leader->key_share(), to_helper->key_share())) {
    TANDEM_RETURN_IF_ERROR(SignUpload(key, UploadRole::kLeader, to_leader));
    return SignUpload(key, UploadRole::kHelper, to_helper);
  }
  ProofDigest p;
  if (public_digest != nullptr) {
    p = *public_digest;
  } else {
    TANDEM_ASSIGN_OR_RETURN(p, PublicPartsDigest(to_leader->key_share()));
  }
  TANDEM_RETURN_IF_ERROR(SignUpload(key, UploadRole::kLeader, to_leader, &p));
  return SignUpload(key, UploadRole::kHelper, to_helper, &p);
}

absl::Status VerifyUploadSignature(const proto::UploadTicket& ticket, UploadRole role,
                                   absl::string_view ticket_digest,
                                   absl::string_view content_digest, absl::string_view signature) {
  if (ticket.device_public_key().empty()) {
    return absl::UnauthenticatedError("the upload ticket names no device key");
  }
  absl::StatusOr<Ed25519VerifyingKey> key =
      Ed25519VerifyingKey::FromRaw(ticket.device_public_key());
  if (!key.ok()) return absl::UnauthenticatedError("the ticket's device key is malformed");
  if (signature.empty()) {
    return absl::UnauthenticatedError("the upload carries no device signature");
  }
  if (!key->Verify(UploadSigningInput(role, ticket_digest, content_digest), signature).ok()) {
    return absl::UnauthenticatedError(
        "the upload's device signature does not verify under the ticket's device key");
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::SignedEnrollmentToken> MintEnrollmentToken(
    const Ed25519SigningKey& operator_key, const proto::EnrollmentToken& token) {
  TANDEM_RETURN_IF_ERROR(CheckToken(token, absl::StatusCode::kInvalidArgument));
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, Deterministic(token));
  std::string input = Domain(kEnrollmentTokenDomain);
  input += bytes;
  TANDEM_ASSIGN_OR_RETURN(std::string sig, operator_key.Sign(input));
  proto::SignedEnrollmentToken out;
  out.set_token(std::move(bytes));
  out.set_signature(std::move(sig));
  return out;
}

absl::StatusOr<proto::EnrollmentToken> VerifyEnrollmentToken(
    const std::vector<Ed25519VerifyingKey>& operator_keys,
    const proto::SignedEnrollmentToken& signed_token, int64_t now_unix_ms) {
  if (signed_token.token().empty() || signed_token.token().size() > kMaxEnrollmentTokenBytes) {
    return absl::UnauthenticatedError("enrollment token is empty or oversized");
  }
  std::string input = Domain(kEnrollmentTokenDomain);
  input += signed_token.token();
  bool verified = false;
  for (const Ed25519VerifyingKey& k : operator_keys) {
    if (k.Verify(input, signed_token.signature()).ok()) {
      verified = true;
      break;
    }
  }
  if (!verified) {
    return absl::UnauthenticatedError(
        "enrollment token is not signed by an enrollment key this coordinator trusts");
  }
  proto::EnrollmentToken token;
  if (!token.ParseFromString(signed_token.token())) {
    return absl::UnauthenticatedError("enrollment token does not parse");
  }
  TANDEM_RETURN_IF_ERROR(CheckToken(token, absl::StatusCode::kUnauthenticated));
  if (now_unix_ms > token.expiry_unix_ms()) {
    return absl::UnauthenticatedError("enrollment token has expired");
  }
  return token;
}

std::string EncodeEnrollmentToken(const proto::SignedEnrollmentToken& token) {
  return absl::StrCat(kTokenTextPrefix, absl::WebSafeBase64Escape(token.SerializeAsString()));
}

absl::StatusOr<proto::SignedEnrollmentToken> DecodeEnrollmentToken(absl::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (!absl::StartsWith(text, kTokenTextPrefix) || text.size() > 2 * kMaxEnrollmentTokenBytes) {
    return absl::InvalidArgumentError("not an enrollment token (expected tdmenroll1.<base64url>)");
  }
  text.remove_prefix(kTokenTextPrefix.size());
  std::string bytes;
  proto::SignedEnrollmentToken out;
  if (!absl::WebSafeBase64Unescape(text, &bytes) || !out.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("enrollment token text does not decode");
  }
  return out;
}

}  // namespace tandem::crypto
