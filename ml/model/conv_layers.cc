#include "ml/model/conv_layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace tandem::ml {
absl::StatusOr<std::unique_ptr<Conv2DLayer>> Conv2DLayer::Create(std::string name, ImageShape in,
                                                                 Conv2DOptions o) {
  if (in.channels <= 0 || in.height <= 0 || in.width <= 0 || o.out_channels <= 0 || o.kernel <= 0 ||
      o.stride <= 0 || o.padding < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d '", name, "': sizes must be positive and padding non-negative"));
  }
  if (o.kernel > in.height + 2 * o.padding || o.kernel > in.width + 2 * o.padding) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d '", name, "': kernel ", o.kernel, " exceeds the padded input"));
  }
  ImageShape out{o.out_channels, (in.height + 2 * o.padding - o.kernel) / o.stride + 1,
                 (in.width + 2 * o.padding - o.kernel) / o.stride + 1};
  return std::unique_ptr<Conv2DLayer>(new Conv2DLayer(std::move(name), in, out, o));
}

std::string Conv2DLayer::config() const {
  return absl::StrCat(in_.channels, "x", in_.height, "x", in_.width, "->", out_.channels, "x",
                      out_.height, "x", out_.width, " k=", opt_.kernel, " s=", opt_.stride,
                      " p=", opt_.padding);
}

std::vector<ParamSpec> Conv2DLayer::params() const {
  return {{"weight", ParamKind::kWeight, {out_.channels, in_.channels * opt_.kernel * opt_.kernel}},
          {"bias", ParamKind::kBias, {out_.channels}}};
}

void Conv2DLayer::Init(absl::Span<float> params, absl::BitGenRef gen) const {
  const int64_t fan_in = in_.channels * opt_.kernel * opt_.kernel;
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in));
  const int64_t nw = out_.channels * fan_in;
  for (int64_t i = 0; i < nw; ++i)
    params[i] = static_cast<float>(absl::Uniform(gen, -limit, limit));
  for (int64_t i = nw; i < nw + out_.channels; ++i) params[i] = 0.0f;
}

// col row index = (c * k + ky) * k + kx; column = oy * ow + ox.
void Conv2DLayer::Im2Col(const float* image, float* col, int64_t ld) const {
  const int64_t k = opt_.kernel, s = opt_.stride, p = opt_.padding;
  const int64_t h = in_.height, w = in_.width, oh = out_.height, ow = out_.width;
  for (int64_t c = 0; c < in_.channels; ++c) {
    const float* plane = image + c * h * w;
    for (int64_t ky = 0; ky < k; ++ky) {
      for (int64_t kx = 0; kx < k; ++kx) {
        float* dst = col + ((c * k + ky) * k + kx) * ld;
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * s + ky - p;
          float* drow = dst + oy * ow;
          if (iy < 0 || iy >= h) {
            for (int64_t ox = 0; ox < ow; ++ox) drow[ox] = 0.0f;
            continue;
          }
          const float* srow = plane + iy * w;
          if (s == 1) {
            // Contiguous run: ix = ox + kx - p is valid for ox in [lo, hi).
            const int64_t lo = std::max<int64_t>(0, p - kx);
            const int64_t hi = std::min<int64_t>(ow, w + p - kx);
            for (int64_t ox = 0; ox < lo; ++ox) drow[ox] = 0.0f;
            if (hi > lo) std::memcpy(drow + lo, srow + lo + kx - p, (hi - lo) * sizeof(float));
            for (int64_t ox = std::max(hi, lo); ox < ow; ++ox) drow[ox] = 0.0f;
            continue;
          }
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t ix = ox * s + kx - p;
            drow[ox] = (ix >= 0 && ix < w) ? srow[ix] : 0.0f;
          }
        }
      }
    }
  }
}

void Conv2DLayer::Col2ImAdd(const float* col, int64_t ld, float* image) const {
  const int64_t k = opt_.kernel, s = opt_.stride, p = opt_.padding;
  const int64_t h = in_.height, w = in_.width, oh = out_.height, ow = out_.width;
  for (int64_t c = 0; c < in_.channels; ++c) {
    float* plane = image + c * h * w;
    for (int64_t ky = 0; ky < k; ++ky) {
      for (int64_t kx = 0; kx < k; ++kx) {
        const float* src = col + ((c * k + ky) * k + kx) * ld;
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * s + ky - p;
          if (iy < 0 || iy >= h) continue;
          float* drow = plane + iy * w;
          const float* srow = src + oy * ow;
          if (s == 1) {
            const int64_t lo = std::max<int64_t>(0, p - kx);
            const int64_t hi = std::min<int64_t>(ow, w + p - kx);
            float* d = drow + kx - p;
            for (int64_t ox = lo; ox < hi; ++ox) d[ox] += srow[ox];
            continue;
          }
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t ix = ox * s + kx - p;
            if (ix >= 0 && ix < w) drow[ix] += srow[ox];
          }
        }
      }
    }
  }
}

// One GEMM per sample, written straight into the sample's output row (a
// C x pixels block), so no sample-interleaved temporary is copied back; the
// per-sample column matrix (fan_in x pixels, 225 KiB for 32x14x14 3x3) stays
// in L2 between im2col and the GEMM.
absl::Status Conv2DLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                  Matrix* out) const {
  const int64_t fan_in = in_.channels * opt_.kernel * opt_.kernel;
  const int64_t npix = out_.height * out_.width;
  ConstMatrixMap w(params.data(), out_.channels, fan_in);
  Eigen::Map<const Eigen::VectorXf> b(params.data() + out_.channels * fan_in, out_.channels);
  out->resize(in.rows(), out_.size());
  thread_local Matrix col;  // per-thread scratch, reused across calls
  col.resize(fan_in, npix);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    Im2Col(in.row(r).data(), col.data(), npix);
    // Bias first, then the GEMM accumulates (Eigen would zero-fill the
    // destination of a plain assignment: one pass less over the output).
    MatrixMap y(out->row(r).data(), out_.channels, npix);
    y.colwise() = b;
    y.noalias() += w * col;
  }
  return absl::OkStatus();
}

void Conv2DLayer::Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                           const Matrix& grad_out, Matrix* grad_in,
                           absl::Span<float> grad_params) const {
  const int64_t fan_in = in_.channels * opt_.kernel * opt_.kernel;
  const int64_t npix = out_.height * out_.width;
  ConstMatrixMap w(params.data(), out_.channels, fan_in);
  MatrixMap gw(grad_params.data(), out_.channels, fan_in);
  Eigen::Map<Eigen::VectorXf> gb(grad_params.data() + out_.channels * fan_in, out_.channels);
  if (grad_in != nullptr) grad_in->resize(in.rows(), in_.size());
  thread_local Matrix col, gcol;  // per-thread scratch
  col.resize(fan_in, npix);
  if (grad_in != nullptr) gcol.resize(fan_in, npix);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    Im2Col(in.row(r).data(), col.data(), npix);
    ConstMatrixMap gy(grad_out.row(r).data(), out_.channels, npix);
    gw.noalias() += gy * col.transpose();
    gb += gy.rowwise().sum();
    if (grad_in != nullptr) {
      gcol.noalias() = w.transpose() * gy;
      grad_in->row(r).setZero();  // zeroed here, while the row is in cache
      Col2ImAdd(gcol.data(), npix, grad_in->row(r).data());
    }
  }
}

absl::StatusOr<std::unique_ptr<Pool2DLayer>> Pool2DLayer::Create(std::string name, PoolKind kind,
                                                                 ImageShape in, int64_t kernel,
                                                                 int64_t stride) {
  if (in.channels <= 0 || in.height <= 0 || in.width <= 0 || kernel <= 0 || stride <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("pool2d '", name, "': sizes must be positive"));
  }
  if (kernel > in.height || kernel > in.width) {
    return absl::InvalidArgumentError(
        absl::StrCat("pool2d '", name, "': window ", kernel, " exceeds the input"));
  }
  ImageShape out{in.channels, (in.height - kernel) / stride + 1, (in.width - kernel) / stride + 1};
  return std::unique_ptr<Pool2DLayer>(
      new Pool2DLayer(std::move(name), kind, in, out, kernel, stride));
}

std::string Pool2DLayer::config() const {
  return absl::StrCat(in_.channels, "x", in_.height, "x", in_.width, " k=", kernel_,
                      " s=", stride_);
}

absl::Status Pool2DLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                  Matrix* out) const {
  const int64_t h = in_.height, w = in_.width, oh = out_.height, ow = out_.width;
  const float inv_area = 1.0f / static_cast<float>(kernel_ * kernel_);
  out->resize(in.rows(), out_.size());
  if (kind_ == PoolKind::kMax && kernel_ == 2 && stride_ == 2) {
    // Fast path for the common 2x2/2 max pool.
    for (Eigen::Index r = 0; r < in.rows(); ++r) {
      const float* x = in.row(r).data();
      float* y = out->row(r).data();
      for (int64_t c = 0; c < in_.channels; ++c) {
        for (int64_t oy = 0; oy < oh; ++oy) {
          const float* r0 = x + (c * h + 2 * oy) * w;
          const float* r1 = r0 + w;
          float* yr = y + (c * oh + oy) * ow;
          for (int64_t ox = 0; ox < ow; ++ox) {
            yr[ox] = std::max(std::max(r0[2 * ox], r0[2 * ox + 1]),
                              std::max(r1[2 * ox], r1[2 * ox + 1]));
          }
        }
      }
    }
    return absl::OkStatus();
  }
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    const float* x = in.row(r).data();
    float* y = out->row(r).data();
    for (int64_t c = 0; c < in_.channels; ++c) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          float acc = kind_ == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
          for (int64_t ky = 0; ky < kernel_; ++ky) {
            const float* xr = x + (c * h + oy * stride_ + ky) * w + ox * stride_;
            for (int64_t kx = 0; kx < kernel_; ++kx) {
              acc = kind_ == PoolKind::kMax ? std::max(acc, xr[kx]) : acc + xr[kx];
            }
          }
          y[(c * oh + oy) * ow + ox] = kind_ == PoolKind::kMax ? acc : acc * inv_area;
        }
      }
    }
  }
  return absl::OkStatus();
}

void Pool2DLayer::Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                           const Matrix& grad_out, Matrix* grad_in,
                           absl::Span<float> grad_params) const {
  if (grad_in == nullptr) return;
  const int64_t h = in_.height, w = in_.width, oh = out_.height, ow = out_.width;
  const float inv_area = 1.0f / static_cast<float>(kernel_ * kernel_);
  const bool fast = kind_ == PoolKind::kMax && kernel_ == 2 && stride_ == 2;
  if (fast && h == 2 * oh && w == 2 * ow) {
    grad_in->resize(in.rows(), in_.size());  // the windows tile the input: all cells written
  } else {
    grad_in->setZero(in.rows(), in_.size());
  }
  if (fast) {
    // The first window element equal to the forward maximum takes the
    // gradient (same rule as the general path).
    for (Eigen::Index r = 0; r < in.rows(); ++r) {
      const float* x = in.row(r).data();
      const float* y = out.row(r).data();
      const float* g = grad_out.row(r).data();
      float* gx = grad_in->row(r).data();
      for (int64_t c = 0; c < in_.channels; ++c) {
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t o = (c * oh + oy) * ow;
          const int64_t b0 = (c * h + 2 * oy) * w;
          const float* __restrict x0 = x + b0;
          const float* __restrict x1 = x0 + w;
          const float* __restrict yr = y + o;
          const float* __restrict gr = g + o;
          float* __restrict g0 = gx + b0;
          float* __restrict g1 = g0 + w;
          for (int64_t ox = 0; ox < ow; ++ox) {
            // Branch-free (bitwise, not short-circuit, so it vectorises):
            // windows do not overlap, so each cell is written once.
            const float m = yr[ox], go = gr[ox];
            const bool e0 = x0[2 * ox] == m;
            const bool e1 = (x0[2 * ox + 1] == m) & !e0;
            const bool e2 = (x1[2 * ox] == m) & !(e0 | e1);
            const bool e3 = !(e0 | e1 | e2);
            g0[2 * ox] = e0 ? go : 0.0f;
            g0[2 * ox + 1] = e1 ? go : 0.0f;
            g1[2 * ox] = e2 ? go : 0.0f;
            g1[2 * ox + 1] = e3 ? go : 0.0f;
          }
        }
      }
    }
    return;
  }
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    const float* x = in.row(r).data();
    const float* g = grad_out.row(r).data();
    float* gx = grad_in->row(r).data();
    for (int64_t c = 0; c < in_.channels; ++c) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const float go = g[(c * oh + oy) * ow + ox];
          const int64_t base = (c * h + oy * stride_) * w + ox * stride_;
          if (kind_ == PoolKind::kAverage) {
            for (int64_t ky = 0; ky < kernel_; ++ky) {
              for (int64_t kx = 0; kx < kernel_; ++kx) gx[base + ky * w + kx] += go * inv_area;
            }
            continue;
          }
          int64_t best = base;
          for (int64_t ky = 0; ky < kernel_; ++ky) {
            for (int64_t kx = 0; kx < kernel_; ++kx) {
              if (x[base + ky * w + kx] > x[best]) best = base + ky * w + kx;
            }
          }
          gx[best] += go;
        }
      }
    }
  }
}

}  // namespace tandem::ml
