// Fixed-point encoding of float model updates into Z_2^64 (or Z_2^32) for DPF
// aggregation, with L2 clipping, and decoding of sums.
//
// Encode: x is scaled by min(1, C / ||x||_2) (L2 clipping to C), then each
// coordinate is mapped to round(x_i * 2^f) (nearest, ties away from zero) in
// two's complement mod 2^value_bits. Decode: a sum of at most n encodings is
// read as a signed integer and divided by 2^f. Create() guarantees the sum
// cannot wrap: n * (C * 2^f + 1) < 2^(value_bits - 1), because every clipped
// coordinate satisfies |x_i| <= C.
//
// Immutable value type; thread-safe.
#ifndef TANDEM_CRYPTO_FIXED_POINT_FIXED_POINT_H_
#define TANDEM_CRYPTO_FIXED_POINT_FIXED_POINT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::crypto {

// std::llround(w) (nearest, ties away from zero) for |w| < 2^63, inline
// and without libm's call, so that Encode's loop vectorizes (llround was
// ~5 % of a client's report at the main job's D = 25,450, perf 2026-12-07).
// Exact: the conversion truncates toward zero, and w - trunc(w) is exact
// (Sterbenz: trunc(w) >= w / 2 for w >= 1; from 2^52 up w is an integer and
// the difference is 0).
inline int64_t RoundHalfAwayFromZero(double w) {
  const int64_t t = static_cast<int64_t>(w);
  const double frac = w - static_cast<double>(t);
  return t + static_cast<int64_t>(frac >= 0.5) - static_cast<int64_t>(frac <= -0.5);
}

class FixedPointCodec {
 public:
  // Returns INVALID_ARGUMENT unless 0 <= frac_bits <= 52, clip_norm is finite
  // and > 0, max_summands >= 1, value_bits is 32 or 64, and the sum of
  // max_summands clipped encodings fits (see above).
  static absl::StatusOr<FixedPointCodec> Create(int frac_bits, double clip_norm,
                                                uint64_t max_summands, int value_bits = 64);

  int frac_bits() const { return frac_bits_; }
  double clip_norm() const { return clip_norm_; }
  uint64_t max_summands() const { return max_summands_; }
  int value_bits() const { return value_bits_; }
  // Quantisation step 2^-f: each decoded coordinate of one encoding is within
  // step/2 of the clipped input.
  double step() const { return 1.0 / scale_; }

  // Clips and encodes x into out; returns the clipping factor applied (1.0
  // when ||x|| <= C). INVALID_ARGUMENT when sizes differ or x holds a NaN or
  // infinity (nothing meaningful is written then).
  absl::StatusOr<double> Encode(absl::Span<const float> x, absl::Span<uint64_t> out) const;

  // Decodes a sum (mod 2^value_bits) of at most max_summands encodings.
  // INVALID_ARGUMENT when sizes differ.
  absl::Status Decode(absl::Span<const uint64_t> sum, absl::Span<double> out) const;
  absl::Status Decode(absl::Span<const uint64_t> sum, absl::Span<float> out) const;

 private:
  FixedPointCodec(int frac_bits, double clip_norm, uint64_t max_summands, int value_bits)
      : frac_bits_(frac_bits),
        clip_norm_(clip_norm),
        max_summands_(max_summands),
        value_bits_(value_bits),
        scale_(static_cast<double>(uint64_t{1} << frac_bits)) {}

  int frac_bits_;
  double clip_norm_;
  uint64_t max_summands_;
  int value_bits_;
  double scale_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_FIXED_POINT_FIXED_POINT_H_
