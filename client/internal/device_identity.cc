#include "client/internal/device_identity.h"

#include <algorithm>
#include <utility>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"

namespace tandem::client {

DeviceIdentity::DeviceIdentity(crypto::Ed25519SigningKey key,
                               std::optional<proto::SignedEnrollmentToken> token)
    : key_(std::move(key)), id_(crypto::DeviceId(key_.PublicKeyRaw())), token_(std::move(token)) {}

absl::StatusOr<std::unique_ptr<DeviceIdentity>> DeviceIdentity::LoadOrCreate(
    StateStore* storage, SecureRandom* random, const std::string& enrollment_token_text) {
  if (random == nullptr) return absl::InvalidArgumentError("device identity needs a random source");
  std::optional<proto::SignedEnrollmentToken> token;
  if (!enrollment_token_text.empty()) {
    TANDEM_ASSIGN_OR_RETURN(token, crypto::DecodeEnrollmentToken(enrollment_token_text));
  }
  std::optional<std::string> seed;
  if (storage != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(seed, storage->Get(kDeviceKeyKey));
  }
  if (!seed.has_value()) {
    std::string fresh(crypto::kEd25519SeedSize, '\0');
    TANDEM_RETURN_IF_ERROR(
        random->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(fresh.data()), fresh.size())));
    // Stored before first use: a device that crashes after its first
    // check-in comes back as the same device.
    if (storage != nullptr) TANDEM_RETURN_IF_ERROR(storage->Put(kDeviceKeyKey, fresh));
    seed = std::move(fresh);
  }
  absl::StatusOr<crypto::Ed25519SigningKey> key = crypto::Ed25519SigningKey::FromSeed(*seed);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        "the stored device key is malformed (delete the state store's device-key to start as a "
        "new device)");
  }
  return std::unique_ptr<DeviceIdentity>(new DeviceIdentity(*std::move(key), std::move(token)));
}

absl::StatusOr<proto::CheckInRequest> DeviceIdentity::MakeCheckIn(const std::string& task_id,
                                                                  const Clock& clock,
                                                                  SecureRandom& random) {
  proto::CheckInRequest req;
  req.set_task_id(task_id);
  if (token_.has_value() && !enrolled_) *req.mutable_enrollment_token() = *token_;
  std::string nonce(crypto::kCheckInNonceSize, '\0');
  TANDEM_RETURN_IF_ERROR(
      random.Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size())));
  // Strictly increasing, so two check-ins never carry one timestamp.
  int64_t now = absl::ToUnixMillis(clock.Now());
  int64_t last = last_timestamp_ms_.load();
  while (true) {
    const int64_t ts = std::max(now, last + 1);
    if (last_timestamp_ms_.compare_exchange_weak(last, ts)) {
      now = ts;
      break;
    }
  }
  TANDEM_RETURN_IF_ERROR(crypto::SignCheckIn(key_, now, nonce, &req));
  return req;
}

absl::Status DeviceIdentity::SignUploads(UploadRequests* requests) const {
  if (!requests->to_leader.has_ticket()) return absl::OkStatus();  // unticketed rounds
  proto::UploadTicket ticket;
  if (!ticket.ParseFromString(requests->to_leader.ticket().ticket())) {
    return absl::InvalidArgumentError("the upload ticket does not parse");
  }
  // A ticket bound to no device (an older coordinator): nothing to sign.
  if (ticket.device_public_key().empty()) return absl::OkStatus();
  return SignUploadRequests(key_, requests);
}

absl::Status SignUploadRequests(const crypto::Ed25519SigningKey& key, UploadRequests* requests) {
  return crypto::SignUploadPair(
      key, &requests->to_leader, &requests->to_helper,
      requests->public_digest.has_value() ? &*requests->public_digest : nullptr);
}

}  // namespace tandem::client
