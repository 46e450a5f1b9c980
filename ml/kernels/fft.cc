#include "ml/kernels/fft.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace tandem::ml::kernels {
namespace {

using cf = std::complex<float>;

// Plain complex product (avoids the C99 Annex G NaN handling of operator*).
inline cf Mul(cf a, cf b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Fft>> Fft::Create(int64_t n, FftImpl impl) {
  if (n < 1 || n > (int64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat("FFT length ", n, " outside [1, 2^26]"));
  }
  if (impl == FftImpl::kFftw) return internal::CreateFftwFft(n);
  return std::unique_ptr<Fft>(new internal::ReferenceFft(n));
}

namespace internal {

ReferenceFft::ReferenceFft(int64_t n) : Fft(n), pow2_((n & (n - 1)) == 0) {
  m_ = 1;
  while (m_ < (pow2_ ? n : 2 * n - 1)) m_ <<= 1;
  int log_m = 0;
  while ((int64_t{1} << log_m) < m_) ++log_m;
  bitrev_.resize(m_);
  for (int64_t i = 0; i < m_; ++i) {
    int64_t r = 0;
    for (int b = 0; b < log_m; ++b) r |= ((i >> b) & 1) << (log_m - 1 - b);
    bitrev_[i] = static_cast<int32_t>(r);
  }
  twiddle_.resize(m_ / 2);
  for (int64_t k = 0; k < m_ / 2; ++k) {
    const double a = -2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(m_);
    twiddle_[k] = cf(static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a)));
  }
  if (!pow2_) {
    // chirp_k = exp(-pi i k^2 / n); k^2 is reduced mod 2n to keep precision.
    chirp_.resize(size());
    for (int64_t k = 0; k < size(); ++k) {
      const int64_t k2 = (k * k) % (2 * size());
      const double a = -std::numbers::pi * static_cast<double>(k2) / static_cast<double>(size());
      chirp_[k] = cf(static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a)));
    }
    chirp_fft_.assign(m_, cf(0, 0));
    chirp_fft_[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < size(); ++k) {
      chirp_fft_[k] = std::conj(chirp_[k]);
      chirp_fft_[m_ - k] = std::conj(chirp_[k]);
    }
    Radix2(chirp_fft_.data(), /*inverse=*/false);
  }
}

void ReferenceFft::Radix2(cf* x, bool inverse) const {
  for (int64_t i = 0; i < m_; ++i) {
    const int64_t j = bitrev_[i];
    if (i < j) std::swap(x[i], x[j]);
  }
  for (int64_t len = 2; len <= m_; len <<= 1) {
    const int64_t half = len / 2, tstep = m_ / len;
    for (int64_t i = 0; i < m_; i += len) {
      for (int64_t j = 0; j < half; ++j) {
        cf w = twiddle_[j * tstep];
        if (inverse) w = std::conj(w);
        const cf t = Mul(w, x[i + j + half]);
        const cf u = x[i + j];
        x[i + j] = u + t;
        x[i + j + half] = u - t;
      }
    }
  }
}

void ReferenceFft::Bluestein(cf* x) const {
  std::vector<cf> a(m_, cf(0, 0));
  for (int64_t k = 0; k < size(); ++k) a[k] = Mul(x[k], chirp_[k]);
  Radix2(a.data(), false);
  for (int64_t k = 0; k < m_; ++k) a[k] = Mul(a[k], chirp_fft_[k]);
  Radix2(a.data(), true);
  const float inv_m = 1.0f / static_cast<float>(m_);
  for (int64_t k = 0; k < size(); ++k) x[k] = Mul(a[k], chirp_[k]) * inv_m;
}

void ReferenceFft::Forward(cf* x) const {
  if (pow2_) {
    Radix2(x, false);
  } else {
    Bluestein(x);
  }
}

void ReferenceFft::Inverse(cf* x) const {
  const float inv_n = 1.0f / static_cast<float>(size());
  if (pow2_) {
    Radix2(x, true);
    for (int64_t k = 0; k < size(); ++k) x[k] *= inv_n;
    return;
  }
  // IFFT(x) = conj(FFT(conj(x))) / n.
  for (int64_t k = 0; k < size(); ++k) x[k] = std::conj(x[k]);
  Bluestein(x);
  for (int64_t k = 0; k < size(); ++k) x[k] = std::conj(x[k]) * inv_n;
}

}  // namespace internal
}  // namespace tandem::ml::kernels
