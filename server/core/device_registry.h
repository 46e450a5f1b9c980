// Who may take part: the coordinator's registry of device keys
// (ARCHITECTURE.md "Trust model", client row; crypto/sign/device_auth.h).
//
// A check-in is authenticated before any round state is touched:
//   0. form (crypto::CheckCheckInForm: sizes, client id = DeviceId(key), a
//      timestamp within max_skew of this server's clock);  UNAUTHENTICATED
//      then, enrolled policy: an unknown key without a token is refused
//      here, before any curve arithmetic;                  PERMISSION_DENIED
//   1. proof of possession (crypto::VerifyCheckIn): the signature by the
//      device key over the whole request;                  UNAUTHENTICATED
//   2. replay: a nonce seen within the skew window is refused;  UNAUTHENTICATED
//   2b. the device's check-in rate (checkin_rate);         RESOURCE_EXHAUSTED
//   3. enrollment: the key must be enrolled and not revoked. An unknown key
//      is enrolled here when the request carries an operator-signed
//      enrollment token (verified under one of `enrollment_keys`, unexpired,
//      for this key or any key, redeemed once, durably) or, in the open
//      policy, unconditionally; otherwise, and for a revoked key,
//      PERMISSION_DENIED.
// Operators add keys (an allow-list entry), revoke devices and list them
// through the coordinator's admin API. The open policy proves possession
// too (no one can check in under another device's id) but admits any new
// key, so it does not stop Sybils: one-host simulations only, refused by
// the daemon off loopback. Flower's SuperNode authentication and FLARE's
// per-site certificates are the enrolled policy's peers [I].
//
// Replay memory is in process, so a check-in signed before this registry
// was created (timestamp_unix_ms < its start) is refused as a possible
// replay across a restart (UNAUTHENTICATED, counted "replay"): a request
// captured before a restart cannot be played again after it. The cost is
// that a device whose clock lags the coordinator's by d is refused for the
// first d after a restart (d < max_skew); it signs a fresh check-in later.
//
// Thread safety: all methods are thread-safe (one internal mutex, never held
// across a signature check; store writes only on enrollment and revocation).
#ifndef TANDEM_SERVER_CORE_DEVICE_REGISTRY_H_
#define TANDEM_SERVER_CORE_DEVICE_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/rate_limiter.h"
#include "crypto/sign/ed25519.h"
#include "proto/coordinator.pb.h"
#include "server/store/device_store.h"

namespace tandem::server {

enum class DevicePolicy {
  kEnrolled,  // only keys an operator enrolled (allow-list or token)
  kOpen,      // any key enrolls itself at first check-in (simulations)
};

struct DeviceRegistryOptions {
  DevicePolicy policy = DevicePolicy::kEnrolled;
  // Operators' enrollment-token verifying keys (none: only the allow-list).
  std::vector<crypto::Ed25519VerifyingKey> enrollment_keys;
  absl::Duration max_skew = absl::Seconds(60);
  // Check-ins per second each device may make after its proof verified
  // (bursts of checkin_burst); over it RESOURCE_EXHAUSTED, counted "rate".
  // 0 = no limit. One assignment per device and round holds regardless.
  double checkin_rate = 0;
  double checkin_burst = 20;
  // The same per source address (the gRPC peer without its port), checked
  // before anything else: RESOURCE_EXHAUSTED, counted "address_rate".
  // 0 = no limit (the default: NATs put many devices behind one address).
  double address_rate = 0;
  double address_burst = 100;
};

class DeviceRegistry {
 public:
  // Loads every stored device. Pointers not owned, must outlive the
  // registry. INVALID_ARGUMENT for null seams or max_skew <= 0.
  static absl::StatusOr<std::unique_ptr<DeviceRegistry>> Create(DeviceRegistryOptions options,
                                                                DeviceStore* store,
                                                                const Clock* clock);

  // Steps 1-3 above; the verified device key on success.
  // `source`: the caller's address (empty: not known; no address limit).
  absl::StatusOr<crypto::Ed25519VerifyingKey> Authenticate(const proto::CheckInRequest& request,
                                                           absl::string_view source = "");
  // The key of an enrolled (not revoked) device; PERMISSION_DENIED
  // otherwise (unknown or revoked).
  absl::StatusOr<std::string> ActiveKey(const std::string& device_id);

  // Operator API. EnrollKey: INVALID_ARGUMENT for a malformed key,
  // FAILED_PRECONDITION for a revoked device, idempotent otherwise.
  // Revoke: NOT_FOUND for an unknown device; idempotent.
  absl::StatusOr<proto::DeviceRecord> EnrollKey(const std::string& public_key,
                                                const std::string& operator_id);
  absl::StatusOr<proto::DeviceRecord> Revoke(const std::string& device_id);
  std::vector<proto::DeviceRecord> List();

  // Refused check-ins since start, by reason: "proof", "replay",
  // "not_enrolled", "revoked", "token", "rate".
  std::map<std::string, uint64_t> Refusals();

 private:
  DeviceRegistry(DeviceRegistryOptions options, DeviceStore* store, const Clock* clock)
      : options_(std::move(options)),
        store_(store),
        clock_(clock),
        started_ms_(absl::ToUnixMillis(clock->Now())),
        rate_(options_.checkin_rate, options_.checkin_burst, kMaxRateKeys, clock),
        address_rate_(options_.address_rate, options_.address_burst, kMaxRateKeys, clock) {}
  static constexpr size_t kMaxRateKeys = 1 << 20;
  absl::Status Refuse(const char* reason, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  static absl::Status NotEnrolled(const std::string& device_id);
  // Enrolls `key` with the request's token (or, open policy, without).
  absl::Status EnrollAtCheckIn(const proto::CheckInRequest& request, const std::string& device_id,
                               int64_t now_ms) ABSL_LOCKS_EXCLUDED(mu_);

  const DeviceRegistryOptions options_;
  DeviceStore* const store_;
  const Clock* const clock_;
  const int64_t started_ms_;  // check-ins signed before this are refused
  RateLimiter rate_;          // per device id (internally synchronized)
  RateLimiter address_rate_;  // per source address

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, proto::DeviceRecord> devices_ ABSL_GUARDED_BY(mu_);
  // Parsed keys of enrolled devices that checked in (saves FromRaw's checks).
  absl::flat_hash_map<std::string, crypto::Ed25519VerifyingKey> keys_ ABSL_GUARDED_BY(mu_);
  // Nonces seen within the skew window, oldest first, for expiry.
  absl::flat_hash_set<std::string> nonces_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, std::string>> nonce_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> refusals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_DEVICE_REGISTRY_H_
