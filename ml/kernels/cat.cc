#include "ml/kernels/cat.h"

#include <complex>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/fft.h"
#include "ml/kernels/internal/attention_core.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels {
namespace {

using cf = std::complex<float>;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

absl::Status ValidateMix(const Tensor& z, const Tensor& v) {
  TANDEM_RETURN_IF_ERROR(CheckRank(z, 3, "z_logits"));
  TANDEM_RETURN_IF_ERROR(CheckRank(v, 3, "v"));
  if (z.dim(0) != v.dim(0) || z.dim(2) != v.dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "z_logits ", z.ShapeString(), " must be (B, H, N) for v ", v.ShapeString(), " (B, N, D)"));
  }
  if (v.dim(2) % z.dim(1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("D = ", v.dim(2), " is not divisible by H = ", z.dim(1)));
  }
  return absl::OkStatus();
}

// z* = softmax over N of every (b, h) row.
std::vector<float> SoftmaxRows(const Tensor& z) {
  std::vector<float> s(z.data().begin(), z.data().end());
  const int64_t rows = z.dim(0) * z.dim(1), n = z.dim(2);
  tbb::parallel_for(int64_t{0}, rows,
                    [&](int64_t r) { internal::SoftmaxInPlace(s.data() + r * n, n); });
  return s;
}

absl::StatusOr<Tensor> MixGather(const Tensor& z, const Tensor& v) {
  const int64_t b = z.dim(0), h = z.dim(1), n = z.dim(2), d = v.dim(2), dh = d / h;
  const std::vector<float> zs = SoftmaxRows(z);
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Zeros(v.shape()));
  tbb::parallel_for(int64_t{0}, b * n, [&](int64_t task) {
    const int64_t bb = task / n, i = task % n;
    float* yi = y.mutable_ptr() + (bb * n + i) * d;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t shift = (j - i + n) % n;
      const float* vj = v.ptr() + (bb * n + j) * d;
      for (int64_t hh = 0; hh < h; ++hh) {
        const float w = zs[(bb * h + hh) * n + shift];
        for (int64_t c = hh * dh; c < (hh + 1) * dh; ++c) yi[c] += w * vj[c];
      }
    }
  });
  return y;
}

absl::StatusOr<Tensor> MixFft(const Tensor& z, const Tensor& v) {
  const int64_t b = z.dim(0), h = z.dim(1), n = z.dim(2), d = v.dim(2), dh = d / h;
  const std::vector<float> zs = SoftmaxRows(z);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Fft> fft, Fft::Create(n));
  // conj(FFT(z*)) per (b, h).
  std::vector<cf> zf(static_cast<size_t>(b * h * n));
  tbb::parallel_for(int64_t{0}, b * h, [&](int64_t r) {
    cf* row = zf.data() + r * n;
    for (int64_t j = 0; j < n; ++j) row[j] = cf(zs[r * n + j], 0.0f);
    fft->Forward(row);
    for (int64_t j = 0; j < n; ++j) row[j] = std::conj(row[j]);
  });
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Zeros(v.shape()));
  // Two real channels share one complex transform: the filter conj(FFT(z*))
  // is that of a real sequence, so it maps real inputs to real outputs and
  // the real and imaginary parts never mix.
  const int64_t pairs = (dh + 1) / 2;
  tbb::parallel_for(int64_t{0}, b * h * pairs, [&](int64_t task) {
    const int64_t bh = task / pairs, p = task % pairs;
    const int64_t bb = bh / h, hh = bh % h;
    const int64_t c0 = hh * dh + 2 * p;
    const bool two = 2 * p + 1 < dh;
    std::vector<cf> buf(n);
    const float* vb = v.ptr() + bb * n * d;
    for (int64_t j = 0; j < n; ++j) {
      buf[j] = cf(vb[j * d + c0], two ? vb[j * d + c0 + 1] : 0.0f);
    }
    fft->Forward(buf.data());
    const cf* filt = zf.data() + bh * n;
    for (int64_t j = 0; j < n; ++j) {
      const cf a = buf[j], w = filt[j];
      buf[j] = cf(a.real() * w.real() - a.imag() * w.imag(),
                  a.real() * w.imag() + a.imag() * w.real());
    }
    fft->Inverse(buf.data());
    float* yb = y.mutable_ptr() + bb * n * d;
    for (int64_t j = 0; j < n; ++j) {
      yb[j * d + c0] = buf[j].real();
      if (two) yb[j * d + c0 + 1] = buf[j].imag();
    }
  });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> CatMix(const Tensor& z_logits, const Tensor& v, CatMethod method) {
  TANDEM_RETURN_IF_ERROR(ValidateMix(z_logits, v));
  return method == CatMethod::kFft ? MixFft(z_logits, v) : MixGather(z_logits, v);
}

absl::StatusOr<Tensor> CatForward(const Tensor& x, const Tensor& w_a, const Tensor& w_v,
                                  const Tensor& w_o, CatMethod method) {
  TANDEM_RETURN_IF_ERROR(CheckRank(x, 3, "x"));
  TANDEM_RETURN_IF_ERROR(CheckRank(w_a, 2, "w_a"));
  TANDEM_RETURN_IF_ERROR(CheckRank(w_v, 2, "w_v"));
  TANDEM_RETURN_IF_ERROR(CheckRank(w_o, 2, "w_o"));
  const int64_t b = x.dim(0), n = x.dim(1), d = x.dim(2), h = w_a.dim(1);
  if (w_a.dim(0) != d || w_v.dim(0) != d || w_v.dim(1) != d || w_o.dim(0) != d ||
      w_o.dim(1) != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weights w_a ", w_a.ShapeString(), ", w_v ", w_v.ShapeString(), ", w_o ",
        w_o.ShapeString(), " do not fit x ", x.ShapeString(), " (need (D,H), (D,D), (D,D))"));
  }
  if (d % h != 0) {
    return absl::InvalidArgumentError(absl::StrCat("D = ", d, " not divisible by H = ", h));
  }
  Eigen::Map<const RowMat> xm(x.ptr(), b * n, d);
  Eigen::Map<const RowMat> wa(w_a.ptr(), d, h), wv(w_v.ptr(), d, d), wo(w_o.ptr(), d, d);
  TANDEM_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros({b, h, n}));
  const RowMat zt = xm * wa;  // (B N, H)
  for (int64_t bb = 0; bb < b; ++bb) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t hh = 0; hh < h; ++hh) z.mutable_ptr()[(bb * h + hh) * n + i] = zt(bb * n + i, hh);
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor v, Tensor::Zeros({b, n, d}));
  Eigen::Map<RowMat>(v.mutable_ptr(), b * n, d).noalias() = xm * wv;
  TANDEM_ASSIGN_OR_RETURN(Tensor mixed, CatMix(z, v, method));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Zeros({b, n, d}));
  Eigen::Map<RowMat>(y.mutable_ptr(), b * n, d).noalias() =
      Eigen::Map<const RowMat>(mixed.ptr(), b * n, d) * wo;
  return y;
}

}  // namespace tandem::ml::kernels
