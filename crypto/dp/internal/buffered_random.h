// Buffered view of a SecureRandom for samplers that draw many small values.
// Uniform integers are drawn by rejection (no modulo bias): draw
// bit_length(n) random bits, retry while the value is >= n.
// Not thread-safe; one instance per sampler. The SecureRandom is not owned
// and must outlive this object. Internal to crypto/dp.
#ifndef TANDEM_CRYPTO_DP_INTERNAL_BUFFERED_RANDOM_H_
#define TANDEM_CRYPTO_DP_INTERNAL_BUFFERED_RANDOM_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/random.h"
#include "crypto/dp/internal/big_uint.h"

namespace tandem::dp::internal {

class BufferedRandom {
 public:
  // Words fetched from the SecureRandom per refill.
  static constexpr int kBufferWords = 256;

  // REQUIRES: rng != nullptr.
  explicit BufferedRandom(SecureRandom* rng) : rng_(rng) {}

  // Each returns INTERNAL when the underlying generator fails.
  absl::StatusOr<uint64_t> Word();
  absl::StatusOr<bool> Bit();
  // Uniform in [0, n). Returns INVALID_ARGUMENT for n == 0.
  absl::StatusOr<uint64_t> UniformBelow(uint64_t n);
  absl::StatusOr<BigUint> UniformBelow(const BigUint& n);

  // Words consumed so far (for tests of the rejection logic).
  uint64_t words_consumed() const { return words_consumed_; }

 private:
  absl::Status Refill();

  SecureRandom* rng_;  // Not owned.
  std::array<uint64_t, kBufferWords> buffer_{};
  int next_ = kBufferWords;
  uint64_t bits_ = 0;
  int bits_left_ = 0;
  uint64_t words_consumed_ = 0;
};

}  // namespace tandem::dp::internal

#endif  // TANDEM_CRYPTO_DP_INTERNAL_BUFFERED_RANDOM_H_
