#include "server/core/device_registry.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<DeviceRegistry>> DeviceRegistry::Create(
    DeviceRegistryOptions options, DeviceStore* store, const Clock* clock) {
  if (store == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("device registry: store and clock required");
  }
  if (options.max_skew <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("device registry: max_skew must be > 0");
  }
  std::unique_ptr<DeviceRegistry> r(new DeviceRegistry(std::move(options), store, clock));
  TANDEM_ASSIGN_OR_RETURN(std::vector<proto::DeviceRecord> devices, store->LoadDevices());
  absl::MutexLock lock(&r->mu_);
  for (proto::DeviceRecord& d : devices) {
    std::string id = d.device_id();
    r->devices_[id] = std::move(d);
  }
  return r;
}

absl::Status DeviceRegistry::NotEnrolled(const std::string& device_id) {
  return absl::PermissionDeniedError(
      absl::StrCat("device ", device_id,
                   " is not enrolled: ask the operator to enroll its key, or check in once with an "
                   "enrollment token"));
}

absl::Status DeviceRegistry::Refuse(const char* reason, absl::Status status) {
  absl::MutexLock lock(&mu_);
  ++refusals_[reason];
  return status;
}

absl::StatusOr<crypto::Ed25519VerifyingKey> DeviceRegistry::Authenticate(
    const proto::CheckInRequest& request, absl::string_view source) {
  if (!source.empty() && !address_rate_.Allow(source)) {
    return Refuse("address_rate", absl::ResourceExhaustedError(
                                      "too many check-ins from this address: retry later"));
  }
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  const int64_t skew_ms = absl::ToInt64Milliseconds(options_.max_skew);
  if (absl::Status s = crypto::CheckCheckInForm(request, now_ms, skew_ms); !s.ok()) {
    return Refuse("proof", s);
  }
  const std::string& id = request.client_id();
  // A key nobody enrolled, without a token, is refused before any curve
  // arithmetic: a flood of fresh keys costs a hash and a lookup each. A
  // known device's parsed key is reused (no point checks).
  std::optional<crypto::Ed25519VerifyingKey> known;
  {
    absl::MutexLock lock(&mu_);
    auto it = devices_.find(id);
    if (it == devices_.end() && options_.policy == DevicePolicy::kEnrolled &&
        !request.has_enrollment_token()) {
      ++refusals_["not_enrolled"];
      return NotEnrolled(id);
    }
    if (auto k = keys_.find(id); k != keys_.end()) known = k->second;
  }
  absl::StatusOr<crypto::Ed25519VerifyingKey> key =
      crypto::VerifyCheckIn(request, known.has_value() ? &*known : nullptr, now_ms, skew_ms);
  if (!key.ok()) return Refuse("proof", key.status());
  if (!rate_.Allow(id)) {
    return Refuse("rate", absl::ResourceExhaustedError(
                              "this device checks in too often: retry after retry_after_ms"));
  }
  bool enrolled = false;
  {
    absl::MutexLock lock(&mu_);
    while (!nonce_order_.empty() && nonce_order_.front().first < now_ms - 2 * skew_ms) {
      nonces_.erase(nonce_order_.front().second);
      nonce_order_.pop_front();
    }
    if (request.timestamp_unix_ms() < started_ms_) {
      ++refusals_["replay"];
      return absl::UnauthenticatedError(
          "check-in signed before this coordinator started (a replay across a restart is "
          "refused): sign a fresh one");
    }
    if (!nonces_.insert(request.nonce()).second) {
      ++refusals_["replay"];
      return absl::UnauthenticatedError("check-in replayed (nonce already seen)");
    }
    nonce_order_.emplace_back(now_ms, request.nonce());
    auto it = devices_.find(id);
    if (it != devices_.end()) {
      if (it->second.state() != "enrolled") {
        ++refusals_["revoked"];
        return absl::PermissionDeniedError(absl::StrCat("device ", id, " is revoked"));
      }
      it->second.set_last_checkin_unix_ms(now_ms);
      enrolled = true;
      if (!known.has_value()) keys_.emplace(id, *key);
    }
  }
  if (!enrolled) TANDEM_RETURN_IF_ERROR(EnrollAtCheckIn(request, id, now_ms));
  return key;
}

absl::Status DeviceRegistry::EnrollAtCheckIn(const proto::CheckInRequest& request,
                                             const std::string& device_id, int64_t now_ms) {
  proto::DeviceRecord d;
  d.set_device_id(device_id);
  d.set_public_key(request.device_public_key());
  d.set_state("enrolled");
  d.set_enrolled_unix_ms(now_ms);
  if (request.has_enrollment_token()) {
    absl::StatusOr<proto::EnrollmentToken> token =
        crypto::VerifyEnrollmentToken(options_.enrollment_keys, request.enrollment_token(), now_ms);
    if (!token.ok()) {
      return Refuse("token", absl::PermissionDeniedError(
                                 absl::StrCat("device not enrolled: ", token.status().message())));
    }
    if (!token->device_public_key().empty() &&
        token->device_public_key() != request.device_public_key()) {
      return Refuse("token", absl::PermissionDeniedError(
                                 "device not enrolled: the enrollment token is for another key"));
    }
    d.set_enrolled_by(absl::StrCat("token:", token->issuer()));
    // Under the registry's lock only to order it with revocations: the
    // store's transaction decides who redeemed the token first.
    absl::MutexLock lock(&mu_);
    if (auto it = devices_.find(device_id); it != devices_.end()) {
      if (it->second.state() != "enrolled") {
        return absl::PermissionDeniedError(absl::StrCat("device ", device_id, " is revoked"));
      }
      return absl::OkStatus();  // a concurrent check-in enrolled it
    }
    absl::Status s = store_->RedeemToken(token->token_id(), d);
    if (absl::IsAlreadyExists(s)) {
      ++refusals_["token"];
      return absl::PermissionDeniedError(
          "device not enrolled: this enrollment token was already redeemed");
    }
    TANDEM_RETURN_IF_ERROR(s);
    d.set_last_checkin_unix_ms(now_ms);
    devices_[device_id] = d;
    return absl::OkStatus();
  }
  if (options_.policy != DevicePolicy::kOpen) return Refuse("not_enrolled", NotEnrolled(device_id));
  d.set_enrolled_by("open");
  absl::MutexLock lock(&mu_);
  if (devices_.contains(device_id)) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(store_->PutDevice(d));
  d.set_last_checkin_unix_ms(now_ms);
  devices_[device_id] = d;
  return absl::OkStatus();
}

absl::StatusOr<std::string> DeviceRegistry::ActiveKey(const std::string& device_id) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(device_id);
  if (it == devices_.end() || it->second.state() != "enrolled") {
    return absl::PermissionDeniedError(absl::StrCat("device ", device_id, " is not enrolled"));
  }
  return it->second.public_key();
}

absl::StatusOr<proto::DeviceRecord> DeviceRegistry::EnrollKey(const std::string& public_key,
                                                              const std::string& operator_id) {
  if (!crypto::Ed25519VerifyingKey::FromRaw(public_key).ok()) {
    return absl::InvalidArgumentError("public_key must be a 32-byte Ed25519 public key");
  }
  const std::string id = crypto::DeviceId(public_key);
  absl::MutexLock lock(&mu_);
  if (auto it = devices_.find(id); it != devices_.end()) {
    if (it->second.state() != "enrolled") {
      return absl::FailedPreconditionError(absl::StrCat("device ", id, " is revoked"));
    }
    return it->second;
  }
  proto::DeviceRecord d;
  d.set_device_id(id);
  d.set_public_key(public_key);
  d.set_state("enrolled");
  d.set_enrolled_by(absl::StrCat("allowlist:", operator_id));
  d.set_enrolled_unix_ms(absl::ToUnixMillis(clock_->Now()));
  TANDEM_RETURN_IF_ERROR(store_->PutDevice(d));
  devices_[id] = d;
  return d;
}

absl::StatusOr<proto::DeviceRecord> DeviceRegistry::Revoke(const std::string& device_id) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(device_id);
  if (it == devices_.end()) return absl::NotFoundError(absl::StrCat("no device ", device_id));
  if (it->second.state() == "revoked") return it->second;
  proto::DeviceRecord d = it->second;
  d.set_state("revoked");
  d.set_revoked_unix_ms(absl::ToUnixMillis(clock_->Now()));
  TANDEM_RETURN_IF_ERROR(store_->PutDevice(d));
  it->second = d;
  keys_.erase(device_id);
  return d;
}

std::vector<proto::DeviceRecord> DeviceRegistry::List() {
  absl::MutexLock lock(&mu_);
  std::vector<proto::DeviceRecord> out;
  out.reserve(devices_.size());
  for (const auto& [id, d] : devices_) out.push_back(d);
  std::sort(out.begin(), out.end(), [](const proto::DeviceRecord& a, const proto::DeviceRecord& b) {
    return a.device_id() < b.device_id();
  });
  return out;
}

std::map<std::string, uint64_t> DeviceRegistry::Refusals() {
  absl::MutexLock lock(&mu_);
  return refusals_;
}

}  // namespace tandem::server
