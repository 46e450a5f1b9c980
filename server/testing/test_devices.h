// Test devices: deterministic Ed25519 device keys named by a label, their
// ids and signed check-ins (crypto/sign/device_auth.h), for tests that play
// clients against a Coordinator or a tandem-coordinator. Test-only.
#ifndef TANDEM_SERVER_TESTING_TEST_DEVICES_H_
#define TANDEM_SERVER_TESTING_TEST_DEVICES_H_

#include <openssl/sha.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/ed25519.h"
#include "proto/coordinator.pb.h"

namespace tandem::server::testing {

// The key of the test device `label` (seed = SHA-256 of a tag and the label).
inline crypto::Ed25519SigningKey TestDeviceKey(absl::string_view label) {
  std::string input = "tandem.test_device_label";
  input.push_back('\0');
  input.append(label.data(), label.size());
  std::string seed(32, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(),
         reinterpret_cast<unsigned char*>(seed.data()));
  return *crypto::Ed25519SigningKey::FromSeed(seed);
}

// The id the coordinator knows the test device `label` by.
inline std::string TestDeviceId(absl::string_view label) {
  return crypto::DeviceId(TestDeviceKey(label).PublicKeyRaw());
}

// A check-in of the test device `label` signed at `now_unix_ms` with a fresh
// nonce (a process-wide counter: never repeated).
inline proto::CheckInRequest SignedCheckIn(absl::string_view label, int64_t now_unix_ms,
                                           const std::string& task_id = "") {
  static std::atomic<uint64_t> counter{1};
  const uint64_t n = counter.fetch_add(1);
  std::string nonce(crypto::kCheckInNonceSize, '\0');
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<char>(n >> (8 * i));
  proto::CheckInRequest r;
  r.set_task_id(task_id);
  (void)crypto::SignCheckIn(TestDeviceKey(label), now_unix_ms, nonce, &r);
  return r;
}

}  // namespace tandem::server::testing

#endif  // TANDEM_SERVER_TESTING_TEST_DEVICES_H_
