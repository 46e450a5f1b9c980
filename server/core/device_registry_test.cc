// DeviceRegistry: who may check in (proof, replay, enrollment, revocation),
// over a real SQLite device store.
#include "server/core/device_registry.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/device_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/test_devices.h"

namespace tandem::server {
namespace {

using ::tandem::server::testing::SignedCheckIn;
using ::tandem::server::testing::TestDeviceId;
using ::tandem::server::testing::TestDeviceKey;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::StatusCode kDenied = absl::StatusCode::kPermissionDenied;
constexpr absl::StatusCode kUnauth = absl::StatusCode::kUnauthenticated;

class DeviceRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  // (Re)opens the store and the registry over dir_ (a restart).
  DeviceRegistry& Open(DevicePolicy policy = DevicePolicy::kEnrolled) {
    registry_.reset();
    store_ = *DeviceStore::Open((dir_ / "devices.db").string());
    DeviceRegistryOptions o;
    o.policy = policy;
    o.enrollment_keys = {*operator_.VerifyingKey()};
    o.max_skew = absl::Seconds(60);
    registry_ = *DeviceRegistry::Create(o, store_.get(), &clock_);
    return *registry_;
  }
  int64_t Now() const { return absl::ToUnixMillis(clock_.Now()); }
  proto::SignedEnrollmentToken Token(const std::string& for_key = "", char id = 't') {
    proto::EnrollmentToken t;
    t.set_token_id(std::string(16, id));
    t.set_expiry_unix_ms(Now() + 60000);
    t.set_issuer("backend");
    t.set_device_public_key(for_key);
    return *crypto::MintEnrollmentToken(operator_, t);
  }
  proto::CheckInRequest WithToken(const std::string& label, proto::SignedEnrollmentToken token) {
    proto::CheckInRequest r;
    *r.mutable_enrollment_token() = std::move(token);
    std::string nonce(16, '\0');
    nonce[0] = static_cast<char>(++nonces_);
    nonce[1] = static_cast<char>(nonces_ >> 8);
    nonce[15] = 'T';
    EXPECT_THAT(crypto::SignCheckIn(TestDeviceKey(label), Now(), nonce, &r), IsOk());
    return r;
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  crypto::Ed25519SigningKey operator_ = *crypto::Ed25519SigningKey::FromSeed(std::string(32, 'o'));
  std::unique_ptr<DeviceStore> store_;
  std::unique_ptr<DeviceRegistry> registry_;
  int nonces_ = 0;
};

TEST_F(DeviceRegistryTest, UnenrolledKeysAreRefusedAndNothingIsStored) {
  DeviceRegistry& r = Open();
  for (int i = 0; i < 50; ++i) {  // a Sybil flood of fresh keys
    EXPECT_THAT(r.Authenticate(SignedCheckIn(absl::StrCat("sybil", i), Now())).status(),
                StatusIs(kDenied, HasSubstr("not enrolled")));
  }
  EXPECT_TRUE(r.List().empty());
  EXPECT_EQ(r.Refusals()["not_enrolled"], 50u);
  EXPECT_TRUE(Open().List().empty());  // nothing durable either
}

TEST_F(DeviceRegistryTest, AllowListedKeyChecksInAndSurvivesARestart) {
  DeviceRegistry& r = Open();
  TANDEM_ASSERT_OK_AND_ASSIGN(auto d, r.EnrollKey(TestDeviceKey("phone-1").PublicKeyRaw(), "ops"));
  EXPECT_EQ(d.device_id(), TestDeviceId("phone-1"));
  EXPECT_EQ(d.enrolled_by(), "allowlist:ops");
  EXPECT_THAT(r.Authenticate(SignedCheckIn("phone-1", Now())), IsOk());
  EXPECT_THAT(Open().Authenticate(SignedCheckIn("phone-1", Now())), IsOk());
  EXPECT_THAT(registry_->EnrollKey("short", "ops").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DeviceRegistryTest, ImpersonationAndReplayAreRefused) {
  DeviceRegistry& r = Open();
  TANDEM_ASSERT_OK(r.EnrollKey(TestDeviceKey("victim").PublicKeyRaw(), "ops").status());
  // The outsider names the victim's id and key but signs with its own key.
  proto::CheckInRequest forged = SignedCheckIn("outsider", Now());
  forged.set_client_id(TestDeviceId("victim"));
  forged.set_device_public_key(TestDeviceKey("victim").PublicKeyRaw());
  EXPECT_THAT(r.Authenticate(forged).status(), StatusIs(kUnauth));
  const proto::CheckInRequest honest = SignedCheckIn("victim", Now());
  EXPECT_THAT(r.Authenticate(honest), IsOk());
  EXPECT_THAT(r.Authenticate(honest).status(), StatusIs(kUnauth, HasSubstr("replayed")));
  // A stale request is refused once outside the skew window.
  const proto::CheckInRequest old = SignedCheckIn("victim", Now());
  clock_.Advance(absl::Seconds(61));
  EXPECT_THAT(r.Authenticate(old).status(), StatusIs(kUnauth, HasSubstr("clock")));
  EXPECT_EQ(r.Refusals()["replay"], 1u);
  EXPECT_EQ(r.Refusals()["proof"], 2u);
}

TEST_F(DeviceRegistryTest, ACheckInCapturedBeforeARestartIsNotReplayedAfterIt) {
  DeviceRegistry& r = Open();
  TANDEM_ASSERT_OK(r.EnrollKey(TestDeviceKey("victim").PublicKeyRaw(), "ops").status());
  const proto::CheckInRequest captured = SignedCheckIn("victim", Now());
  EXPECT_THAT(r.Authenticate(captured), IsOk());
  clock_.Advance(absl::Seconds(5));    // well within the 60 s skew window
  DeviceRegistry& restarted = Open();  // the nonce memory is gone
  EXPECT_THAT(restarted.Authenticate(captured).status(),
              StatusIs(kUnauth, HasSubstr("before this coordinator started")));
  EXPECT_EQ(restarted.Refusals()["replay"], 1u);
  // The device itself signs a fresh one and is served.
  EXPECT_THAT(restarted.Authenticate(SignedCheckIn("victim", Now())), IsOk());
}

TEST_F(DeviceRegistryTest, TokensAreRedeemedOnceAndOnlyByTheirKey) {
  DeviceRegistry& r = Open();
  EXPECT_THAT(r.Authenticate(WithToken("phone-1", Token())), IsOk());
  // Again with the same token from the same device: fine (already enrolled).
  EXPECT_THAT(r.Authenticate(WithToken("phone-1", Token())), IsOk());
  // The same token from another device: redeemed already.
  EXPECT_THAT(r.Authenticate(WithToken("phone-2", Token())).status(),
              StatusIs(kDenied, HasSubstr("already redeemed")));
  // A token for one key does not admit another, even before redemption.
  const std::string k3 = TestDeviceKey("phone-3").PublicKeyRaw();
  EXPECT_THAT(r.Authenticate(WithToken("phone-4", Token(k3, 'u'))).status(),
              StatusIs(kDenied, HasSubstr("another key")));
  EXPECT_THAT(r.Authenticate(WithToken("phone-3", Token(k3, 'u'))), IsOk());
  // Forged (self-signed) and expired tokens.
  proto::EnrollmentToken t;
  t.set_token_id(std::string(16, 'v'));
  t.set_expiry_unix_ms(Now() + 60000);
  auto self_signed = *crypto::MintEnrollmentToken(TestDeviceKey("phone-5"), t);
  EXPECT_THAT(r.Authenticate(WithToken("phone-5", self_signed)).status(), StatusIs(kDenied));
  auto expiring = Token("", 'w');
  clock_.Advance(absl::Seconds(61));
  EXPECT_THAT(r.Authenticate(WithToken("phone-5", expiring)).status(),
              StatusIs(kDenied, HasSubstr("expired")));
  EXPECT_EQ(r.List().size(), 2u);
  // After a restart the redeemed token stays redeemed.
  EXPECT_THAT(Open().Authenticate(WithToken("phone-6", Token())).status(),
              StatusIs(kDenied, HasSubstr("already redeemed")));
  EXPECT_THAT(registry_->Authenticate(SignedCheckIn("phone-1", Now())), IsOk());
}

TEST_F(DeviceRegistryTest, ARevokedDeviceStaysOut) {
  DeviceRegistry& r = Open();
  TANDEM_ASSERT_OK(r.EnrollKey(TestDeviceKey("lost").PublicKeyRaw(), "ops").status());
  TANDEM_ASSERT_OK(r.Revoke(TestDeviceId("lost")).status());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("lost", Now())).status(),
              StatusIs(kDenied, HasSubstr("revoked")));
  EXPECT_THAT(r.ActiveKey(TestDeviceId("lost")).status(), StatusIs(kDenied));
  EXPECT_THAT(r.EnrollKey(TestDeviceKey("lost").PublicKeyRaw(), "ops").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.Revoke("dev-unknown").status(), StatusIs(absl::StatusCode::kNotFound));
  // Durable: a restart (and a fresh token) does not bring it back.
  EXPECT_THAT(Open().Authenticate(WithToken("lost", Token())).status(),
              StatusIs(kDenied, HasSubstr("revoked")));
}

TEST_F(DeviceRegistryTest, CheckInRatesArePerDeviceAndPerAddress) {
  registry_.reset();
  store_ = *DeviceStore::Open((dir_ / "devices.db").string());
  DeviceRegistryOptions o;
  o.policy = DevicePolicy::kOpen;
  o.checkin_rate = 1;
  o.checkin_burst = 2;
  o.address_rate = 2;
  o.address_burst = 3;
  registry_ = *DeviceRegistry::Create(o, store_.get(), &clock_);
  DeviceRegistry& r = *registry_;
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d1", Now()), "ipv4:10.0.0.1"), IsOk());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d1", Now()), "ipv4:10.0.0.2"), IsOk());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d1", Now()), "ipv4:10.0.0.3").status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("too often")));
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d2", Now()), "ipv4:10.0.0.1"), IsOk());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d3", Now()), "ipv4:10.0.0.1"), IsOk());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d4", Now()), "ipv4:10.0.0.1").status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("address")));
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d1", Now()), "ipv4:10.0.0.9"), IsOk());
  EXPECT_THAT(r.Authenticate(SignedCheckIn("d4", Now()), "ipv4:10.0.0.1"), IsOk());
  EXPECT_EQ(r.Refusals()["rate"], 1u);
  EXPECT_EQ(r.Refusals()["address_rate"], 1u);
}

TEST_F(DeviceRegistryTest, OpenPolicyAdmitsNewKeysButStillNeedsTheProof) {
  DeviceRegistry& r = Open(DevicePolicy::kOpen);
  EXPECT_THAT(r.Authenticate(SignedCheckIn("sim-1", Now())), IsOk());
  ASSERT_EQ(r.List().size(), 1u);
  EXPECT_EQ(r.List()[0].enrolled_by(), "open");
  proto::CheckInRequest forged = SignedCheckIn("outsider", Now());
  forged.set_client_id(TestDeviceId("sim-1"));
  EXPECT_THAT(r.Authenticate(forged).status(), StatusIs(kUnauth));
}

}  // namespace
}  // namespace tandem::server
