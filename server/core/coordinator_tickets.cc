// The coordinator's keyed draws and upload tickets: Poisson sampling of the
// cohort and the ticket ids, both HMAC-SHA256 under the stored sampling key
// (so that a restarted coordinator draws the same cohort and ids), and the
// tickets it signs and checks. Split from coordinator.cc; same class, same
// thread-safety (const, read-only state).
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/sign/upload_ticket.h"
#include "server/core/coordinator.h"  // the class these methods belong to

namespace tandem::server {
namespace {

constexpr char kTicketTag[] = "tandem.ticket.v1";
constexpr size_t kTicketIdBytes = 16;

}  // namespace

bool Coordinator::Prf(absl::string_view tag, uint64_t aggregation_round,
                      const std::string& client_id, std::array<uint8_t, 32>* out) const {
  std::string msg(tag);
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<char>(aggregation_round >> (8 * i)));
  msg += client_id;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), sampling_key_.data(), static_cast<int>(sampling_key_.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len) == nullptr ||
      len != out->size()) {
    return false;
  }
  std::memcpy(out->data(), mac, out->size());
  return true;
}

bool Coordinator::Sampled(uint64_t aggregation_round, const std::string& client_id) const {
  std::array<uint8_t, 32> mac;
  // No tag: the draw predates the tickets and is kept, so that a stored
  // round resumes with the same cohort.
  if (!Prf("", aggregation_round, client_id, &mac)) return false;  // never assign on failure
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(mac[i]) << (8 * i);
  // u / 2^64 < q, computed in long double to keep q = 1 exact.
  return static_cast<long double>(u) < options_.task.sample_rate * 18446744073709551616.0L;
}

absl::StatusOr<std::string> Coordinator::TicketId(uint64_t aggregation_round,
                                                  const std::string& client_id) const {
  std::array<uint8_t, 32> mac;
  if (!Prf(kTicketTag, aggregation_round, client_id, &mac)) {
    return absl::InternalError("HMAC-SHA256 of the ticket id failed");
  }
  return std::string(reinterpret_cast<const char*>(mac.data()), kTicketIdBytes);
}

absl::StatusOr<proto::SignedUploadTicket> Coordinator::IssueTicket(
    uint64_t aggregation_round, int64_t deadline_unix_ms, const std::string& client_id,
    const std::string& device_public_key) const {
  proto::UploadTicket t;
  t.set_task_id(options_.task_id);
  t.set_round_id(aggregation_round);
  TANDEM_ASSIGN_OR_RETURN(*t.mutable_ticket_id(), TicketId(aggregation_round, client_id));
  t.set_expiry_unix_ms(deadline_unix_ms);
  // Both aggregators accept uploads under it only with this key's signature.
  t.set_device_public_key(device_public_key);
  return crypto::SignUploadTicket(ticket_key_, t);
}

absl::Status Coordinator::CheckUploadTicket(const proto::UploadDoneRequest& request) const {
  if (!request.has_ticket()) {
    return absl::UnauthenticatedError("UploadDone needs the assignment's upload ticket");
  }
  TANDEM_ASSIGN_OR_RETURN(proto::UploadTicket t,
                          crypto::VerifyUploadTicket(ticket_verifier_, request.ticket()));
  TANDEM_ASSIGN_OR_RETURN(std::string expected, TicketId(request.round_id(), request.client_id()));
  // The signature shows the coordinator issued it; the id, that it issued it
  // to this client for this round. Expiry is not checked here: UploadDone is
  // taken while the round is collecting (the aggregators refuse late uploads).
  if (t.task_id() != options_.task_id || t.round_id() != request.round_id() ||
      t.ticket_id().size() != expected.size() ||
      CRYPTO_memcmp(t.ticket_id().data(), expected.data(), expected.size()) != 0 ||
      request.report_id() != t.ticket_id()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the upload ticket is not client ", request.client_id(), "'s for aggregation round ",
        request.round_id(), " (or the report id is not its ticket id)"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::server
