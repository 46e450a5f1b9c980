// Complex single-precision FFT of any length n >= 1, exact length (no zero
// padding changes the transform: CAT needs exactly length-N circular
// convolutions). Two implementations behind one interface:
//
//  - FftImpl::kFftw (default): FFTW 3 (fftwf, Debian libfftw3-dev), plans
//    made with FFTW_ESTIMATE and cached process-wide per (length, direction,
//    alignment) in ml/kernels/internal/fftw_fft.cc. Faster at every measured
//    length (bench/kernels.md, BM_Fft in kernels_benchmark.cc).
//  - FftImpl::kReference: our own iterative radix-2 Cooley-Tukey for powers
//    of two and Bluestein's chirp-z algorithm (Bluestein 1970) for every
//    other n, written from the textbook formulas. Kept as the reference the
//    FFTW path is tested against.
//
//   TANDEM_ASSIGN_OR_RETURN(auto fft, Fft::Create(n));
//   fft->Forward(buf.data());   // X_k = sum_j x_j exp(-2 pi i jk/n)
//   fft->Inverse(buf.data());   // x_j = (1/n) sum_k X_k exp(+2 pi i jk/n)
//
// Lifecycle: create once per length, reuse. Thread safety: Forward/Inverse
// are const and thread-safe, so one Fft may be shared by threads working on
// different buffers. Create is thread-safe too (FFTW planning is serialised
// by a mutex inside the plan cache).
#ifndef TANDEM_ML_KERNELS_FFT_H_
#define TANDEM_ML_KERNELS_FFT_H_

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::ml::kernels {

enum class FftImpl { kFftw, kReference };

class Fft {
 public:
  // Returns INVALID_ARGUMENT unless 1 <= n <= 2^26; INTERNAL if FFTW cannot
  // make a plan (kFftw only).
  static absl::StatusOr<std::unique_ptr<Fft>> Create(int64_t n, FftImpl impl = FftImpl::kFftw);

  virtual ~Fft() = default;
  Fft(const Fft&) = delete;
  Fft& operator=(const Fft&) = delete;

  int64_t size() const { return n_; }
  virtual FftImpl impl() const = 0;
  // In place. REQUIRES: x points to size() elements (any alignment).
  virtual void Forward(std::complex<float>* x) const = 0;
  // In place, scaled by 1/n. REQUIRES: x points to size() elements.
  virtual void Inverse(std::complex<float>* x) const = 0;

 protected:
  explicit Fft(int64_t n) : n_(n) {}

 private:
  int64_t n_;
};

namespace internal {

// The textbook implementation (FftImpl::kReference). Immutable after
// construction; Forward/Inverse allocate their own scratch (Bluestein only).
class ReferenceFft final : public Fft {
 public:
  // REQUIRES: 1 <= n <= 2^26 (checked by Fft::Create).
  explicit ReferenceFft(int64_t n);

  FftImpl impl() const override { return FftImpl::kReference; }
  void Forward(std::complex<float>* x) const override;
  void Inverse(std::complex<float>* x) const override;

 private:
  void Radix2(std::complex<float>* x, bool inverse) const;  // m_ a power of two
  void Bluestein(std::complex<float>* x) const;             // forward only

  bool pow2_;
  int64_t m_;                    // radix-2 length used (n itself, or the Bluestein length)
  std::vector<int32_t> bitrev_;  // size m_
  std::vector<std::complex<float>> twiddle_;    // exp(-2 pi i k / m_), k < m_/2
  std::vector<std::complex<float>> chirp_;      // exp(-pi i k^2 / n), k < n
  std::vector<std::complex<float>> chirp_fft_;  // FFT_m of the conjugate chirp filter
};

// Defined in internal/fftw_fft.cc. REQUIRES: 1 <= n <= 2^26.
absl::StatusOr<std::unique_ptr<Fft>> CreateFftwFft(int64_t n);

}  // namespace internal
}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_FFT_H_
