#include "ml/kernels/training/cross_spectra.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <random>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::training {
namespace {

using cf = std::complex<float>;

// Uniform integer in [0, n) by rejection (no modulo bias, platform-stable).
uint64_t Bounded(std::mt19937_64& gen, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = gen();
  } while (x >= limit);
  return x % n;
}

// Unnormalised inverse DFT of length fft.size(): x_j <- sum_k x_k e^{+2 pi i jk/n},
// as conj(FFT(conj(x))) so no 1/n is applied and undone.
void UnnormalisedInverse(const Fft& fft, cf* x) {
  const int64_t n = fft.size();
  for (int64_t k = 0; k < n; ++k) x[k] = std::conj(x[k]);
  fft.Forward(x);
  for (int64_t k = 0; k < n; ++k) x[k] = std::conj(x[k]);
}

}  // namespace

absl::StatusOr<SpectralLocations> SampleSpectralLocations(int64_t rows, int64_t cols,
                                                          int64_t kappa1, uint64_t seed) {
  if (rows < 1 || cols < 1 || rows > (int64_t{1} << 31) / cols || kappa1 < 1 ||
      kappa1 > rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_spectra: need 1 <= kappa1 <= rows * cols <= 2^31; got rows=", rows,
        " cols=", cols, " kappa1=", kappa1));
  }
  const int64_t n = rows * cols;
  std::mt19937_64 gen(seed);
  std::unordered_set<int64_t> chosen;
  SpectralLocations out;
  out.reserve(static_cast<size_t>(kappa1));
  // Floyd: for j = n - k .. n - 1 draw t in [0, j]; take t, or j if t was taken.
  for (int64_t j = n - kappa1; j < n; ++j) {
    int64_t t = static_cast<int64_t>(Bounded(gen, static_cast<uint64_t>(j + 1)));
    if (!chosen.insert(t).second) {
      t = j;
      chosen.insert(t);
    }
    out.emplace_back(t / cols, t % cols);
  }
  return out;
}

CrossSpectra::CrossSpectra(const CrossSpectraShape& shape, SpectralLocations locations,
                           std::unique_ptr<Fft> row_fft, std::unique_ptr<Fft> col_fft)
    : shape_(shape),
      locations_(std::move(locations)),
      row_fft_(std::move(row_fft)),
      col_fft_(std::move(col_fft)) {}

absl::StatusOr<std::unique_ptr<CrossSpectra>> CrossSpectra::Create(
    const CrossSpectraShape& s, SpectralLocations locations) {
  if (s.layers < 1 || s.projections < 1 || s.d_out < 1 || s.d_in < 1 || s.kappa1 < 1 ||
      s.kappa2 < 1 || s.kappa2 > s.layers || !std::isfinite(s.scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_spectra: need layers, projections, d_out, d_in, kappa1, kappa2 >= 1, "
        "kappa2 <= layers and a finite scale; got L=", s.layers, " P=", s.projections,
        " d_out=", s.d_out, " d_in=", s.d_in, " kappa1=", s.kappa1, " kappa2=", s.kappa2));
  }
  TANDEM_RETURN_IF_ERROR(
      Tensor::NumElements({s.layers, s.projections, s.d_out, s.d_in}).status());
  const int64_t rows = s.projections * s.d_out, cols = s.d_in;
  if (static_cast<int64_t>(locations.size()) != s.kappa1) {
    return absl::InvalidArgumentError(absl::StrCat("cross_spectra: ", locations.size(),
                                                   " locations for kappa1 = ", s.kappa1));
  }
  std::unordered_set<int64_t> seen;
  for (const auto& [u, v] : locations) {
    if (u < 0 || u >= rows || v < 0 || v >= cols) {
      return absl::InvalidArgumentError(absl::StrCat("cross_spectra: location (", u, ", ", v,
                                                     ") outside ", rows, " x ", cols));
    }
    if (!seen.insert(u * cols + v).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross_spectra: duplicate location (", u, ", ", v, ")"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Fft> row_fft, Fft::Create(cols));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Fft> col_fft, Fft::Create(rows));
  return std::unique_ptr<CrossSpectra>(
      new CrossSpectra(s, std::move(locations), std::move(row_fft), std::move(col_fft)));
}

std::pair<double, double> CrossSpectra::LayerBasis(int64_t w, int64_t l) const {
  const double L = static_cast<double>(shape_.layers);
  if (shape_.transform == LayerTransform::kDct) {
    return {std::cos(std::numbers::pi * (2.0 * l + 1.0) * w / (2.0 * L)), 0.0};
  }
  // Reduce w l mod L first so the phase stays exact for large products.
  const double a = 2.0 * std::numbers::pi * static_cast<double>((w * l) % shape_.layers) / L;
  return {std::cos(a), std::sin(a)};
}

void CrossSpectra::InverseDft2(cf* grid) const {
  const int64_t R = rows(), C = cols();
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, R), [&](const auto& rg) {
    for (int64_t r = rg.begin(); r < rg.end(); ++r) UnnormalisedInverse(*row_fft_, grid + r * C);
  });
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, C, 16), [&](const auto& rg) {
    std::vector<cf> col(static_cast<size_t>(R));
    for (int64_t c = rg.begin(); c < rg.end(); ++c) {
      for (int64_t r = 0; r < R; ++r) col[r] = grid[r * C + c];
      UnnormalisedInverse(*col_fft_, col.data());
      for (int64_t r = 0; r < R; ++r) grid[r * C + c] = col[r];
    }
  });
}

absl::StatusOr<Tensor> CrossSpectra::Forward(const Tensor& coefficients) const {
  const int64_t k1 = shape_.kappa1, k2 = shape_.kappa2, L = shape_.layers;
  if (coefficients.rank() != 2 || coefficients.dim(0) != k2 || coefficients.dim(1) != k1) {
    return absl::InvalidArgumentError(absl::StrCat("cross_spectra: coefficients must be (",
                                                   k2, ", ", k1, "), got ",
                                                   coefficients.ShapeString()));
  }
  const int64_t rc = rows() * cols();
  // Slices M_w = IDFT2(scatter(c[w, :])), w < kappa2.
  std::vector<cf> slices(static_cast<size_t>(k2 * rc), cf(0, 0));
  for (int64_t w = 0; w < k2; ++w) {
    cf* m = slices.data() + w * rc;
    for (int64_t n = 0; n < k1; ++n) {
      const auto& [u, v] = locations_[n];
      m[u * cols() + v] = cf(coefficients.data()[w * k1 + n], 0.0f);
    }
    InverseDft2(m);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Zeros({L, shape_.projections, shape_.d_out, shape_.d_in}));
  float* o = out.mutable_ptr();
  const float scale = static_cast<float>(shape_.scale);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, L), [&](const auto& rg) {
    for (int64_t l = rg.begin(); l < rg.end(); ++l) {
      float* ol = o + l * rc;
      for (int64_t w = 0; w < k2; ++w) {
        const auto [re, im] = LayerBasis(w, l);
        const float a = static_cast<float>(re) * scale, b = static_cast<float>(im) * scale;
        const cf* m = slices.data() + w * rc;
        // Re(phi M) = Re(phi) Re(M) - Im(phi) Im(M).
        for (int64_t i = 0; i < rc; ++i) ol[i] += a * m[i].real() - b * m[i].imag();
      }
    }
  });
  return out;
}

absl::StatusOr<Tensor> CrossSpectra::Adjoint(const Tensor& grad_delta) const {
  const int64_t k1 = shape_.kappa1, k2 = shape_.kappa2, L = shape_.layers;
  const std::vector<int64_t> want = {L, shape_.projections, shape_.d_out, shape_.d_in};
  if (grad_delta.shape() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_spectra: gradient must be (", L, ", ", shape_.projections, ", ", shape_.d_out,
        ", ", shape_.d_in, "), got ", grad_delta.ShapeString()));
  }
  const int64_t rc = rows() * cols();
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({k2, k1}));
  std::vector<cf> q(static_cast<size_t>(rc));
  const float* g = grad_delta.ptr();
  for (int64_t w = 0; w < k2; ++w) {
    // Q_w = sum_l phi_w(l) G_l, then sample IDFT2(Q_w) at the locations.
    std::vector<std::pair<float, float>> phi(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      const auto [re, im] = LayerBasis(w, l);
      phi[l] = {static_cast<float>(re), static_cast<float>(im)};
    }
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rc, 4096), [&](const auto& rg) {
      for (int64_t i = rg.begin(); i < rg.end(); ++i) {
        float re = 0, im = 0;
        for (int64_t l = 0; l < L; ++l) {
          const float gl = g[l * rc + i];
          re += phi[l].first * gl;
          im += phi[l].second * gl;
        }
        q[i] = cf(re, im);
      }
    });
    InverseDft2(q.data());
    for (int64_t n = 0; n < k1; ++n) {
      const auto& [u, v] = locations_[n];
      out.mutable_data()[w * k1 + n] =
          static_cast<float>(shape_.scale) * q[u * cols() + v].real();
    }
  }
  return out;
}

double CrossSpectra::Flops() const {
  const double R = static_cast<double>(rows()), C = static_cast<double>(cols());
  const double k2 = static_cast<double>(shape_.kappa2), L = static_cast<double>(shape_.layers);
  const double fft2 = R * 5.0 * C * std::log2(std::max(C, 2.0)) +
                      C * 5.0 * R * std::log2(std::max(R, 2.0));
  return k2 * fft2 + 4.0 * L * k2 * R * C;
}

}  // namespace tandem::ml::kernels::training
