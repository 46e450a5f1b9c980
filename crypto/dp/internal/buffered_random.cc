#include "crypto/dp/internal/buffered_random.h"

#include <cstring>

#include "base/status_macros.h"

namespace tandem::dp::internal {

absl::Status BufferedRandom::Refill() {
  TANDEM_RETURN_IF_ERROR(rng_->Fill(absl::MakeSpan(
      reinterpret_cast<uint8_t*>(buffer_.data()), sizeof(buffer_))));
  next_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> BufferedRandom::Word() {
  if (next_ == kBufferWords) TANDEM_RETURN_IF_ERROR(Refill());
  ++words_consumed_;
  return buffer_[next_++];
}

absl::StatusOr<bool> BufferedRandom::Bit() {
  if (bits_left_ == 0) {
    TANDEM_ASSIGN_OR_RETURN(bits_, Word());
    bits_left_ = 64;
  }
  const bool b = (bits_ & 1) != 0;
  bits_ >>= 1;
  --bits_left_;
  return b;
}

absl::StatusOr<uint64_t> BufferedRandom::UniformBelow(uint64_t n) {
  if (n == 0) return absl::InvalidArgumentError("UniformBelow(0)");
  if (n == 1) return 0;
  const int bits = 64 - __builtin_clzll(n - 1);  // bit length of n - 1
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const uint64_t w, Word());
    const uint64_t v = w & mask;
    if (v < n) return v;  // Acceptance probability > 1/2.
  }
}

absl::StatusOr<BigUint> BufferedRandom::UniformBelow(const BigUint& n) {
  if (n.IsZero()) return absl::InvalidArgumentError("UniformBelow(0)");
  const int bits = n.BitLength();
  if (bits <= 64) {
    TANDEM_ASSIGN_OR_RETURN(const uint64_t v, UniformBelow(n.limb(0)));
    return BigUint(v);
  }
  // Rejection over [0, 2^bits): acceptance probability >= 1/2.
  const int words = (bits + 63) / 64;
  const int top_bits = bits - 64 * (words - 1);
  const uint64_t top_mask = top_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << top_bits) - 1;
  while (true) {
    BigUint v;
    for (int i = 0; i < words; ++i) {
      TANDEM_ASSIGN_OR_RETURN(uint64_t w, Word());
      if (i == words - 1) w &= top_mask;
      v.set_limb(i, w);
    }
    if (v < n) return v;
  }
}

}  // namespace tandem::dp::internal
