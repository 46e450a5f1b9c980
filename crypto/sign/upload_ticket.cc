#include "crypto/sign/upload_ticket.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <openssl/evp.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "crypto/sign/ed25519.h"
#include "proto/aggregator.pb.h"

namespace tandem::crypto {
namespace {

// At most this many characters of a task id go into an error message.
constexpr size_t kMaxIdInMessage = 64;

std::string Quoted(absl::string_view id) {
  return absl::StrCat("'", absl::CHexEscape(id.substr(0, kMaxIdInMessage)),
                      id.size() > kMaxIdInMessage ? "...'" : "'");
}

// Shape checks shared by signer and verifier; the caller picks the code.
absl::Status CheckShape(const proto::UploadTicket& ticket, absl::StatusCode code) {
  if (ticket.task_id().empty()) return absl::Status(code, "upload ticket has an empty task_id");
  if (ticket.ticket_id().size() != kUploadTicketIdSize) {
    return absl::Status(code, absl::StrCat("upload ticket id must be ", kUploadTicketIdSize,
                                           " bytes, got ", ticket.ticket_id().size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SerializeDeterministic(const proto::UploadTicket& ticket) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!ticket.SerializeToCodedStream(&coded) || coded.HadError()) {
      return absl::InternalError("cannot serialize the upload ticket");
    }
  }  // The CodedOutputStream flushes into `out` when it goes out of scope.
  return out;
}

}  // namespace

std::string Sha256Digest(absl::string_view bytes) {
  std::string digest(32, '\0');
  unsigned int len = 0;
  const int ok =
      EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(digest.data()), &len,
                 EVP_sha256(), nullptr);
  // SHA-256 over memory fails only if OpenSSL itself is broken (no provider,
  // no memory): a trusted invariant, not a property of the input.
  TANDEM_CHECK(ok == 1 && len == digest.size()) << "OpenSSL SHA-256 failed";
  return digest;
}

std::string TicketKeyId(absl::string_view public_key_raw) {
  return Sha256Digest(public_key_raw).substr(0, kTicketKeyIdSize);
}

std::string UploadTicketSigningInput(absl::string_view ticket_bytes) {
  std::string input;
  input.reserve(kUploadTicketDomain.size() + 1 + ticket_bytes.size());
  input.append(kUploadTicketDomain.data(), kUploadTicketDomain.size());
  input.push_back('\0');
  input.append(ticket_bytes.data(), ticket_bytes.size());
  return input;
}

absl::StatusOr<proto::SignedUploadTicket> SignUploadTicket(const Ed25519SigningKey& key,
                                                           const proto::UploadTicket& ticket) {
  TANDEM_RETURN_IF_ERROR(CheckShape(ticket, absl::StatusCode::kInvalidArgument));
  if (ticket.expiry_unix_ms() <= 0) {
    return absl::InvalidArgumentError("upload ticket must have an expiry (expiry_unix_ms > 0)");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, SerializeDeterministic(ticket));
  if (bytes.size() > kMaxUploadTicketBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload ticket is ", bytes.size(), " bytes, over ", kMaxUploadTicketBytes));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string signature, key.Sign(UploadTicketSigningInput(bytes)));
  proto::SignedUploadTicket out;
  *out.mutable_ticket() = std::move(bytes);
  *out.mutable_signature() = std::move(signature);
  out.set_key_id(TicketKeyId(key.PublicKeyRaw()));
  return out;
}

absl::StatusOr<proto::UploadTicket> VerifyUploadTicketWithAnyOf(
    absl::Span<const Ed25519VerifyingKey* const> keys,
    const proto::SignedUploadTicket& signed_ticket) {
  if (signed_ticket.key_id().size() != kTicketKeyIdSize) {
    return absl::UnauthenticatedError(absl::StrCat("upload ticket must name its key (key_id of ",
                                                   kTicketKeyIdSize, " bytes), got ",
                                                   signed_ticket.key_id().size(), " bytes"));
  }
  for (const Ed25519VerifyingKey* key : keys) {
    if (key != nullptr && TicketKeyId(key->Raw()) == signed_ticket.key_id()) {
      return VerifyUploadTicket(*key, signed_ticket);
    }
  }
  return absl::UnauthenticatedError(
      absl::StrCat("upload ticket is signed by a coordinator key this server does not accept (id ",
                   absl::BytesToHexString(signed_ticket.key_id()), ")"));
}

absl::StatusOr<proto::UploadTicket> VerifyUploadTicket(
    const Ed25519VerifyingKey& key, const proto::SignedUploadTicket& signed_ticket) {
  if (signed_ticket.key_id() != TicketKeyId(key.Raw())) {
    return absl::UnauthenticatedError(
        signed_ticket.key_id().empty()
            ? "upload ticket names no key id"
            : absl::StrCat("upload ticket names key ",
                           absl::BytesToHexString(signed_ticket.key_id()),
                           ", not this coordinator key"));
  }
  if (signed_ticket.signature().empty()) {
    return absl::UnauthenticatedError("upload ticket has no signature");
  }
  if (signed_ticket.ticket().empty()) return absl::UnauthenticatedError("upload ticket is empty");
  if (signed_ticket.ticket().size() > kMaxUploadTicketBytes) {
    return absl::UnauthenticatedError(
        absl::StrCat("upload ticket is over ", kMaxUploadTicketBytes, " bytes"));
  }
  const absl::Status verified =
      key.Verify(UploadTicketSigningInput(signed_ticket.ticket()), signed_ticket.signature());
  if (absl::IsUnauthenticated(verified)) {
    return absl::UnauthenticatedError(
        absl::StrCat("upload ticket signature is invalid: ", verified.message()));
  }
  TANDEM_RETURN_IF_ERROR(verified);  // INTERNAL (allocation) passes through.
  proto::UploadTicket ticket;
  if (!ticket.ParseFromString(signed_ticket.ticket())) {
    return absl::UnauthenticatedError("signed upload ticket does not parse");
  }
  TANDEM_RETURN_IF_ERROR(CheckShape(ticket, absl::StatusCode::kUnauthenticated));
  return ticket;
}

absl::Status CheckTicketFor(const proto::UploadTicket& ticket, absl::string_view task_id,
                            uint64_t round_id, absl::string_view report_id, int64_t now_unix_ms,
                            int64_t skew_ms) {
  TANDEM_RETURN_IF_ERROR(CheckShape(ticket, absl::StatusCode::kUnauthenticated));
  if (ticket.task_id() != task_id) {
    return absl::UnauthenticatedError(absl::StrCat(
        "upload ticket is for task ", Quoted(ticket.task_id()), ", not ", Quoted(task_id)));
  }
  if (ticket.round_id() != round_id) {
    return absl::UnauthenticatedError(
        absl::StrCat("upload ticket is for round ", ticket.round_id(), ", not ", round_id));
  }
  // Report ids are not logged (they link a client's uploads); sizes only.
  if (ticket.ticket_id() != report_id) {
    return absl::UnauthenticatedError(
        absl::StrCat("report id (", report_id.size(), " bytes) is not the upload ticket's id"));
  }
  if (ticket.expiry_unix_ms() <= 0) {
    return absl::UnauthenticatedError("upload ticket has no expiry");
  }
  if (now_unix_ms - skew_ms > ticket.expiry_unix_ms()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "upload ticket expired at ", ticket.expiry_unix_ms(), " ms, now ", now_unix_ms, " ms",
        skew_ms > 0 ? absl::StrCat(" (this aggregator's clock less the tolerated clock skew of ",
                                   absl::FormatDuration(absl::Milliseconds(skew_ms)), ")")
                    : ""));
  }
  return absl::OkStatus();
}

std::string TicketDigest(const proto::SignedUploadTicket& signed_ticket) {
  return Sha256Digest(signed_ticket.ticket());
}

}  // namespace tandem::crypto
