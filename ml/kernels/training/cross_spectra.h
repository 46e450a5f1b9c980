// CrossSpectra: cross-layer spectral parameter-efficient fine-tuning
// (NeurIPS 2025, openreview rJ5ky9C3ue; kernels_research.md section 8).
//
// [F] The Q, K, V adaptations of all L layers form one 3-D tensor whose
// spectrum is sparse: kappa1 coefficients inside each kept layer-frequency
// slice, kappa2 frequencies kept along the layer axis (kappa1 * kappa2
// parameters). The paper's code is not released; the transform below is the
// spec's reconstruction [I]:
//   Delta W[l, r, s] = scale * Re( sum_{w < kappa2} phi_w(l)
//                        sum_{n < kappa1} c[w, n] exp(2 pi i (u_n r / R + v_n s / C)) )
// over the stacked tensor (L, R = P d_out, C = d_in): the P projections
// (P = 3 for Q, K, V) are stacked along the output axis, so the output
// (L, P, d_out, d_in) is the same row-major buffer as (L, R, C). The spatial
// part is FourierFT's real inverse 2-D DFT at fixed sampled locations
// (u_n, v_n), shared by every layer frequency. The layer basis phi is
// selectable:
//   kDft: phi_w(l) = exp(2 pi i w l / L)         (periodic across depth)
//   kDct: phi_w(l) = cos(pi (2l + 1) w / (2L))   (the DCT-II basis, smooth
//                                                  and non-periodic in depth)
// No 1/(L R C) normalisation: `scale` (FourierFT's alpha) carries the size.
// Coefficients are real, as in FourierFT.
//
// Adjoint (the gradient wrt c of a loss with dL/dDelta W = G):
//   dL/dc[w, n] = scale * Re( sum_{l,r,s} G[l,r,s] phi_w(l) exp(2 pi i (u_n r/R + v_n s/C)) ).
//
// Algorithm: per kept layer frequency, scatter the coefficients into an
// R x C grid and run one unnormalised inverse 2-D FFT (ml/kernels/fft.h:
// radix-2 or Bluestein, so any R, C); then each layer is a kappa2-term
// combination of those slices (oneTBB over layers). Cost
// O(kappa2 R C log(R C) + L kappa2 R C); the adjoint runs the same steps in
// reverse and samples the kappa1 locations.
//
// Lifecycle: Create once per (shape, locations), reuse. Thread safety:
// Forward/Adjoint are const and may run concurrently.
#ifndef TANDEM_ML_KERNELS_TRAINING_CROSS_SPECTRA_H_
#define TANDEM_ML_KERNELS_TRAINING_CROSS_SPECTRA_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/kernels/fft.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::training {

enum class LayerTransform { kDft, kDct };

struct CrossSpectraShape {
  int64_t layers = 1;       // L
  int64_t projections = 3;  // P (Q, K, V)
  int64_t d_out = 1;
  int64_t d_in = 1;
  int64_t kappa1 = 1;       // coefficients per layer-frequency slice
  int64_t kappa2 = 1;       // kept layer frequencies, <= L
  LayerTransform transform = LayerTransform::kDct;
  double scale = 1.0;       // FourierFT's alpha
};

// (u_n, v_n): row in [0, P d_out), column in [0, d_in).
using SpectralLocations = std::vector<std::pair<int64_t, int64_t>>;

// kappa1 distinct locations drawn uniformly (FourierFT samples uniformly
// [I]; "energy concentrated at low layer-frequencies" is about the layer
// axis, which kappa2 truncates). Deterministic for a seed on every
// platform: Floyd's sampling algorithm over std::mt19937_64 with rejection
// sampling for the bounded draws, so no rows * cols table is allocated. INVALID_ARGUMENT unless 1 <= kappa1 <= rows * cols <= 2^31.
absl::StatusOr<SpectralLocations> SampleSpectralLocations(int64_t rows, int64_t cols,
                                                          int64_t kappa1, uint64_t seed);

class CrossSpectra {
 public:
  // INVALID_ARGUMENT unless every size >= 1, kappa2 <= layers, the stacked
  // tensor has <= kMaxTensorElements entries, scale is finite, and
  // `locations` holds kappa1 distinct in-range pairs.
  static absl::StatusOr<std::unique_ptr<CrossSpectra>> Create(const CrossSpectraShape& shape,
                                                              SpectralLocations locations);

  const CrossSpectraShape& shape() const { return shape_; }
  const SpectralLocations& locations() const { return locations_; }
  int64_t rows() const { return shape_.projections * shape_.d_out; }  // R
  int64_t cols() const { return shape_.d_in; }                        // C

  // coefficients (kappa2, kappa1) -> Delta W (L, P, d_out, d_in).
  // INVALID_ARGUMENT on a shape mismatch.
  absl::StatusOr<Tensor> Forward(const Tensor& coefficients) const;
  // grad_delta (L, P, d_out, d_in) -> dL/dc (kappa2, kappa1), the adjoint of
  // Forward. INVALID_ARGUMENT on a shape mismatch.
  absl::StatusOr<Tensor> Adjoint(const Tensor& grad_delta) const;
  // The layer basis phi_w(l) (real, imaginary); imaginary is 0 for kDct.
  std::pair<double, double> LayerBasis(int64_t w, int64_t l) const;

  // FLOPs of Forward (and of Adjoint): the kappa2 2-D FFTs by 5 N log2 N per
  // complex transform plus 4 L kappa2 R C for the layer combination.
  double Flops() const;

 private:
  CrossSpectra(const CrossSpectraShape& shape, SpectralLocations locations,
               std::unique_ptr<Fft> row_fft, std::unique_ptr<Fft> col_fft);
  // In place unnormalised inverse 2-D DFT of an R x C row-major grid.
  void InverseDft2(std::complex<float>* grid) const;

  CrossSpectraShape shape_;
  SpectralLocations locations_;
  std::unique_ptr<Fft> row_fft_;  // length C (along a row)
  std::unique_ptr<Fft> col_fft_;  // length R (along a column)
};

}  // namespace tandem::ml::kernels::training

#endif  // TANDEM_ML_KERNELS_TRAINING_CROSS_SPECTRA_H_
