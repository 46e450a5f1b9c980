#include "crypto/fixed_point/fixed_point.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::crypto {

absl::StatusOr<FixedPointCodec> FixedPointCodec::Create(int frac_bits, double clip_norm,
                                                        uint64_t max_summands, int value_bits) {
  if (frac_bits < 0 || frac_bits > 52) {
    return absl::InvalidArgumentError(
        absl::StrCat("frac_bits must be in [0, 52], got ", frac_bits));
  }
  if (!std::isfinite(clip_norm) || clip_norm <= 0) {
    return absl::InvalidArgumentError("clip_norm must be finite and positive");
  }
  if (max_summands < 1) return absl::InvalidArgumentError("max_summands must be >= 1");
  if (value_bits != 32 && value_bits != 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("value_bits must be 32 or 64, got ", value_bits));
  }
  // n * (C * 2^f + 1) < 2^(bits-1), evaluated in long double to avoid
  // rounding the bound in our favour.
  const long double per = static_cast<long double>(clip_norm) * std::ldexp(1.0L, frac_bits) + 1;
  const long double total = per * static_cast<long double>(max_summands);
  if (!(total < std::ldexp(1.0L, value_bits - 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sum of ", max_summands, " encodings with clip_norm ", clip_norm, " and ", frac_bits,
        " fractional bits may overflow Z_2^", value_bits));
  }
  return FixedPointCodec(frac_bits, clip_norm, max_summands, value_bits);
}

absl::StatusOr<double> FixedPointCodec::Encode(absl::Span<const float> x,
                                               absl::Span<uint64_t> out) const {
  if (x.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input has ", x.size(), " entries, output ", out.size()));
  }
  double norm2 = 0;
  for (float v : x) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("input holds NaN or infinity");
    norm2 += static_cast<double>(v) * v;
  }
  const double norm = std::sqrt(norm2);
  const double factor = norm > clip_norm_ ? clip_norm_ / norm : 1.0;
  const uint64_t mask = value_bits_ == 64 ? ~uint64_t{0} : (uint64_t{1} << value_bits_) - 1;
  for (size_t i = 0; i < x.size(); ++i) {
    // |x_i * factor| <= C, so the rounded value fits in int64 (Create).
    double v = static_cast<double>(x[i]) * factor;
    if (v > clip_norm_) v = clip_norm_;  // guard against the last ulp of the division
    if (v < -clip_norm_) v = -clip_norm_;
    const int64_t q = RoundHalfAwayFromZero(v * scale_);
    out[i] = static_cast<uint64_t>(q) & mask;
  }
  return factor;
}

namespace {
template <typename F>
absl::Status DecodeImpl(absl::Span<const uint64_t> sum, absl::Span<F> out, int value_bits,
                        double scale) {
  if (sum.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input has ", sum.size(), " entries, output ", out.size()));
  }
  const int shift = 64 - value_bits;
  for (size_t i = 0; i < sum.size(); ++i) {
    // Sign-extend the low value_bits bits (two's complement).
    const int64_t s = static_cast<int64_t>(sum[i] << shift) >> shift;
    out[i] = static_cast<F>(static_cast<double>(s) / scale);
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status FixedPointCodec::Decode(absl::Span<const uint64_t> sum,
                                     absl::Span<double> out) const {
  return DecodeImpl(sum, out, value_bits_, scale_);
}

absl::Status FixedPointCodec::Decode(absl::Span<const uint64_t> sum,
                                     absl::Span<float> out) const {
  return DecodeImpl(sum, out, value_bits_, scale_);
}

}  // namespace tandem::crypto
