// Randomness seams.
//
// SecureRandom is the only source of cryptographic randomness in tandem
// (DPF seeds, noise, report ids). Production code takes a SecureRandom* so
// that tests can substitute DeterministicRandom and produce known-answer
// vectors under fixed seeds. Non-cryptographic randomness (shuffles, cohort
// draws, init) takes an absl::BitGenRef instead.
#ifndef TANDEM_BASE_RANDOM_H_
#define TANDEM_BASE_RANDOM_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem {

class SecureRandom {
 public:
  virtual ~SecureRandom() = default;
  // Fills `out` with random bytes. Returns INTERNAL when the generator fails;
  // callers must treat `out` as unset in that case.
  virtual absl::Status Fill(absl::Span<uint8_t> out) = 0;

  // Convenience: one uniformly random 64-bit word.
  absl::StatusOr<uint64_t> NextUint64();
};

// OpenSSL RAND_bytes, return value checked. Thread-safe (OpenSSL's DRBG is).
// OpenSslRandom::Default() is a process-wide instance, never null.
class OpenSslRandom : public SecureRandom {
 public:
  static OpenSslRandom* Default();
  absl::Status Fill(absl::Span<uint8_t> out) override;
};

// Deterministic AES-128-CTR keystream (NIST SP 800-38A counter mode, 128-bit
// big-endian counter). For tests and reproducible simulations only: the key
// is derived from a public seed. Not thread-safe.
class DeterministicRandom : public SecureRandom {
 public:
  // Key = first 16 bytes of SHA-256("tandem-deterministic-random" || seed_le),
  // counter starts at zero.
  static std::unique_ptr<DeterministicRandom> FromSeed(uint64_t seed);
  // Explicit key and initial counter block (used by the known-answer test).
  static absl::StatusOr<std::unique_ptr<DeterministicRandom>> FromKeyAndCounter(
      const std::array<uint8_t, 16>& key, const std::array<uint8_t, 16>& counter);
  // 32 bytes of key material (e.g. drawn from another SecureRandom): the key
  // is the first 16, the initial counter block the last 16. Copies of the
  // material made here are wiped.
  static absl::StatusOr<std::unique_ptr<DeterministicRandom>> FromKeyMaterial(
      const std::array<uint8_t, 32>& material);

  ~DeterministicRandom() override;
  absl::Status Fill(absl::Span<uint8_t> out) override;

 private:
  struct Impl;
  explicit DeterministicRandom(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_BASE_RANDOM_H_
