// Internal: the device's own Ed25519 key (ARCHITECTURE.md "Trust model",
// client row; crypto/sign/device_auth.h). Created on first run from the
// environment's random and kept in the StateStore under "device-key" (the
// 32-byte seed), so a device keeps its identity, and its enrollment, across
// restarts; without a StateStore it lives as long as the participant (a new
// device each run, which only an open coordinator admits).
//
// The id the servers know the device by is crypto::DeviceId(public key):
// nobody without the key can check in under it. Every check-in is signed
// (fresh timestamp and nonce), so is each upload (for its server, ticket and
// share); the enrollment token, when the app has one, goes with check-ins
// until one succeeds.
//
// Thread safety: immutable after creation but for the enrollment flag
// (atomic); MakeCheckIn may be called from any thread.
// Error codes: INVALID_ARGUMENT for a malformed stored key or token text,
// the StateStore's and random's errors as they come.
#ifndef TANDEM_CLIENT_INTERNAL_DEVICE_IDENTITY_H_
#define TANDEM_CLIENT_INTERNAL_DEVICE_IDENTITY_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/random.h"
#include "client/internal/report_builder.h"
#include "crypto/sign/ed25519.h"
#include "proto/coordinator.pb.h"
#include "tandem/client/participant.h"

namespace tandem::client {

// Signs both uploads of one report with `key` (crypto::SignUploadPair),
// reusing the P its norm proof hashed (requests->public_digest) when it has
// one. Errors as SignUploadPair.
absl::Status SignUploadRequests(const crypto::Ed25519SigningKey& key, UploadRequests* requests);

inline constexpr char kDeviceKeyKey[] = "device-key";

class DeviceIdentity {
 public:
  // Loads the key from `storage` (null: none) or creates and stores one.
  // `enrollment_token_text`: empty, or a token as `tandem-admin token mint`
  // prints it (checked here: INVALID_ARGUMENT when it does not decode).
  static absl::StatusOr<std::unique_ptr<DeviceIdentity>> LoadOrCreate(
      StateStore* storage, SecureRandom* random, const std::string& enrollment_token_text);

  const std::string& id() const { return id_; }
  const crypto::Ed25519SigningKey& key() const { return key_; }

  // A signed check-in for `task_id` at the clock's time (strictly after the
  // previous one's timestamp), with the enrollment token until MarkEnrolled.
  absl::StatusOr<proto::CheckInRequest> MakeCheckIn(const std::string& task_id, const Clock& clock,
                                                    SecureRandom& random);
  // A check-in succeeded: the coordinator knows this key.
  void MarkEnrolled() { enrolled_ = true; }

  // Signs both uploads for their servers (nothing to sign without a ticket
  // or for a ticket that names no device). INVALID_ARGUMENT when the ticket
  // names another device's key (a coordinator bug or attack: never sign it).
  absl::Status SignUploads(UploadRequests* requests) const;

 private:
  DeviceIdentity(crypto::Ed25519SigningKey key, std::optional<proto::SignedEnrollmentToken> token);

  const crypto::Ed25519SigningKey key_;
  const std::string id_;
  const std::optional<proto::SignedEnrollmentToken> token_;
  std::atomic<bool> enrolled_{false};
  std::atomic<int64_t> last_timestamp_ms_{0};
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_DEVICE_IDENTITY_H_
