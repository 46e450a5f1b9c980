#include "base/random.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <climits>
#include <cstring>
#include <vector>

namespace tandem {

absl::StatusOr<uint64_t> SecureRandom::NextUint64() {
  uint8_t bytes[8];
  absl::Status s = Fill(absl::MakeSpan(bytes));
  if (!s.ok()) return s;
  uint64_t v;
  std::memcpy(&v, bytes, sizeof(v));
  return v;
}

OpenSslRandom* OpenSslRandom::Default() {
  static OpenSslRandom* random = new OpenSslRandom();
  return random;
}

absl::Status OpenSslRandom::Fill(absl::Span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const size_t chunk = std::min<size_t>(out.size() - done, INT_MAX);
    if (RAND_bytes(out.data() + done, static_cast<int>(chunk)) != 1) {
      return absl::InternalError("RAND_bytes failed");
    }
    done += chunk;
  }
  return absl::OkStatus();
}

struct DeterministicRandom::Impl {
  struct CtxDeleter {
    void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
  };
  std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter> ctx;
  std::vector<uint8_t> zeros;
};

DeterministicRandom::DeterministicRandom(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
DeterministicRandom::~DeterministicRandom() = default;

absl::StatusOr<std::unique_ptr<DeterministicRandom>>
DeterministicRandom::FromKeyAndCounter(const std::array<uint8_t, 16>& key,
                                       const std::array<uint8_t, 16>& counter) {
  auto impl = std::make_unique<Impl>();
  impl->ctx.reset(EVP_CIPHER_CTX_new());
  if (impl->ctx == nullptr ||
      EVP_EncryptInit_ex(impl->ctx.get(), EVP_aes_128_ctr(), nullptr,
                         key.data(), counter.data()) != 1) {
    return absl::InternalError("AES-128-CTR initialisation failed");
  }
  return std::unique_ptr<DeterministicRandom>(
      new DeterministicRandom(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<DeterministicRandom>> DeterministicRandom::FromKeyMaterial(
    const std::array<uint8_t, 32>& material) {
  std::array<uint8_t, 16> key, counter;
  std::memcpy(key.data(), material.data(), 16);
  std::memcpy(counter.data(), material.data() + 16, 16);
  auto r = FromKeyAndCounter(key, counter);
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(counter.data(), counter.size());
  return r;
}

std::unique_ptr<DeterministicRandom> DeterministicRandom::FromSeed(uint64_t seed) {
  static constexpr char kLabel[] = "tandem-deterministic-random";
  uint8_t input[sizeof(kLabel) - 1 + 8];
  std::memcpy(input, kLabel, sizeof(kLabel) - 1);
  for (int i = 0; i < 8; ++i) input[sizeof(kLabel) - 1 + i] = static_cast<uint8_t>(seed >> (8 * i));
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(input, sizeof(input), digest);
  std::array<uint8_t, 16> key;
  std::memcpy(key.data(), digest, 16);
  auto r = FromKeyAndCounter(key, std::array<uint8_t, 16>{});
  // AES-128-CTR setup only fails when OpenSSL itself is broken; a test RNG
  // has no meaningful way to continue then.
  if (!r.ok()) std::abort();
  return *std::move(r);
}

absl::Status DeterministicRandom::Fill(absl::Span<uint8_t> out) {
  // Keystream = CTR encryption of zeros.
  size_t done = 0;
  while (done < out.size()) {
    const size_t chunk = std::min<size_t>(out.size() - done, 1 << 20);
    if (impl_->zeros.size() < chunk) impl_->zeros.assign(chunk, 0);
    int produced = 0;
    if (EVP_EncryptUpdate(impl_->ctx.get(), out.data() + done, &produced,
                          impl_->zeros.data(), static_cast<int>(chunk)) != 1 ||
        produced != static_cast<int>(chunk)) {
      return absl::InternalError("AES-128-CTR keystream failed");
    }
    done += chunk;
  }
  return absl::OkStatus();
}

}  // namespace tandem
