// Complex FFT of any length n >= 1 in O(n log n): iterative radix-2
// Cooley-Tukey for powers of two, Bluestein's chirp-z algorithm (Bluestein
// 1970) for every other n, so that no zero padding changes the transform
// (CAT needs exactly length-N circular convolutions). Written from the
// textbook formulas.
//
//   TANDEM_ASSIGN_OR_RETURN(auto fft, Fft::Create(n));
//   fft->Forward(buf.data());   // X_k = sum_j x_j exp(-2 pi i jk/n)
//   fft->Inverse(buf.data());   // x_j = (1/n) sum_k X_k exp(+2 pi i jk/n)
//
// Lifecycle: create once per length, reuse. Thread safety: Forward/Inverse
// are const and allocate their own scratch, so one Fft may be shared by
// threads working on different buffers.
#ifndef TANDEM_ML_KERNELS_FFT_H_
#define TANDEM_ML_KERNELS_FFT_H_

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::ml::kernels {

class Fft {
 public:
  // Returns INVALID_ARGUMENT unless 1 <= n <= 2^26.
  static absl::StatusOr<std::unique_ptr<Fft>> Create(int64_t n);

  int64_t size() const { return n_; }
  // In place. REQUIRES: x points to size() elements.
  void Forward(std::complex<float>* x) const;
  // In place, scaled by 1/n. REQUIRES: x points to size() elements.
  void Inverse(std::complex<float>* x) const;

 private:
  explicit Fft(int64_t n);
  void Radix2(std::complex<float>* x, bool inverse) const;  // n_ a power of two
  void Bluestein(std::complex<float>* x) const;             // forward only

  int64_t n_;
  bool pow2_;
  int64_t m_;  // radix-2 length used (n_ itself, or the Bluestein length)
  std::vector<int32_t> bitrev_;               // size m_
  std::vector<std::complex<float>> twiddle_;  // exp(-2 pi i k / m_), k < m_/2
  std::vector<std::complex<float>> chirp_;    // exp(-pi i k^2 / n_), k < n_
  std::vector<std::complex<float>> chirp_fft_;  // FFT_m of the conjugate chirp filter
};

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_FFT_H_
