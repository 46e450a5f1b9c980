#include "ml/kernels/distill/hdd.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::distill {
namespace {

constexpr double kAcoshFloor = 1e-15;     // arcosh clamp of the reference [F]
constexpr double kCentroidFloor = 1e-8;   // centroid clamp of the reference [F]
constexpr int64_t kMaxEmbedDim = 65536;

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double Dot(absl::Span<const double> a, absl::Span<const double> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

absl::Status CheckFinite(absl::Span<const double> v, const char* what) {
  for (double x : v) {
    if (!std::isfinite(x)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a non-finite value"));
    }
  }
  return absl::OkStatus();
}

// Exp0's scale s(n) = sqrt k sinh(theta) / n and its derivative ds/dn.
struct Exp0Scale {
  double n, s, ds_dn;
  bool norm_clamped;
};

Exp0Scale ScaleOf(absl::Span<const double> f, double k) {
  const double sk = std::sqrt(k);
  const double raw = std::sqrt(Dot(f, f));
  Exp0Scale e;
  e.norm_clamped = raw < LorentzModel::kMinNorm;
  e.n = e.norm_clamped ? LorentzModel::kMinNorm : raw;
  const double t = e.n / sk;
  const bool theta_clamped = t > LorentzModel::kMaxTheta;
  const double theta = theta_clamped ? LorentzModel::kMaxTheta : t;
  const double sh = std::sinh(theta);
  e.s = sk * sh / e.n;
  e.ds_dn = (theta_clamped ? 0.0 : std::cosh(theta) / e.n) - sk * sh / (e.n * e.n);
  return e;
}

// d loss / d f for one row, given g = d loss / d Exp0(f) (size D + 1).
void Exp0Backward(absl::Span<const double> f, absl::Span<const double> g, double k,
                  double* out) {
  const Exp0Scale e = ScaleOf(f, k);
  const int64_t d = static_cast<int64_t>(f.size());
  double y2 = 0;
  for (int64_t i = 0; i < d; ++i) y2 += (e.s * f[i]) * (e.s * f[i]);
  const double x0 = std::sqrt(k + y2);
  // g_y = g_{1:} + g_0 d x_0 / d y = g_{1:} + g_0 y / x_0.
  double fg = 0;
  for (int64_t i = 0; i < d; ++i) {
    out[i] = g[i + 1] + g[0] * e.s * f[i] / x0;
    fg += f[i] * out[i];
  }
  // d(s f)/df^T g_y = s g_y + s'(n) (f . g_y) f / |f| (no term when |f| is clamped).
  const double radial = e.norm_clamped ? 0.0 : e.ds_dn * fg / e.n;
  for (int64_t i = 0; i < d; ++i) out[i] = e.s * out[i] + radial * f[i];
}

std::vector<double> MeanRow(const Matrix64& m) {
  std::vector<double> mean(static_cast<size_t>(m.cols), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    const double* p = m.data.data() + r * m.cols;
    for (int64_t c = 0; c < m.cols; ++c) mean[c] += p[c];
  }
  for (double& v : mean) v /= static_cast<double>(m.rows);
  return mean;
}

absl::Status ValidateFeatures(const Matrix64& m, const char* what) {
  if (m.rows < 1 || m.cols < 1 || m.data.size() != static_cast<size_t>(m.rows * m.cols)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a non-empty (n, D) matrix, got (", m.rows, ", ", m.cols, ")"));
  }
  return CheckFinite(m.data, what);
}

Tensor ToTensor(std::vector<int64_t> shape, absl::Span<const double> v) {
  std::vector<float> data(v.begin(), v.end());
  return *Tensor::FromData(std::move(shape), std::move(data));
}

}  // namespace

absl::StatusOr<Matrix64> Matrix64::FromTensor(const Tensor& t) {
  if (t.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a rank-2 tensor, got ", t.ShapeString()));
  }
  Matrix64 m;
  m.rows = t.dim(0);
  m.cols = t.dim(1);
  m.data.assign(t.data().begin(), t.data().end());
  return m;
}

double MinkowskiDot(absl::Span<const double> u, absl::Span<const double> v) {
  return Dot(u, v) - 2.0 * u[0] * v[0];
}

absl::StatusOr<LorentzModel> LorentzModel::Create(double k) {
  if (!std::isfinite(k) || k < 1e-6 || k > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lorentz curvature parameter k must be in [1e-6, 1e6], got ", k));
  }
  return LorentzModel(k);
}

absl::Status LorentzModel::CheckPoint(absl::Span<const double> x, const char* what) const {
  if (x.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs >= 2 coordinates"));
  }
  TANDEM_RETURN_IF_ERROR(CheckFinite(x, what));
  const double q = MinkowskiDot(x, x);
  if (x[0] <= 0 || std::fabs(q + k_) > kPointTolerance * (k_ + x[0] * x[0])) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not on the hyperboloid <x,x>_L = -",
                                                   k_, " (got ", q, ", x_0 = ", x[0], ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> LorentzModel::Exp(absl::Span<const double> x,
                                                      absl::Span<const double> u) const {
  TANDEM_RETURN_IF_ERROR(CheckPoint(x, "Exp base point"));
  if (u.size() != x.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Exp: tangent vector has ", u.size(),
                                                   " coordinates, point has ", x.size()));
  }
  TANDEM_RETURN_IF_ERROR(CheckFinite(u, "Exp tangent vector"));
  const double c = MinkowskiDot(x, u) / k_;
  std::vector<double> v(u.begin(), u.end());
  for (size_t i = 0; i < v.size(); ++i) v[i] += c * x[i];
  const double nu = std::sqrt(std::max(MinkowskiDot(v, v), 0.0));
  std::vector<double> out(x.begin(), x.end());
  if (nu == 0) return out;
  const double sk = std::sqrt(k_), t = nu / sk;
  const double ch = std::cosh(t), sh_scale = sk * std::sinh(t) / nu;
  for (size_t i = 0; i < out.size(); ++i) out[i] = ch * x[i] + sh_scale * v[i];
  return out;
}

absl::StatusOr<std::vector<double>> LorentzModel::Log(absl::Span<const double> x,
                                                      absl::Span<const double> y) const {
  TANDEM_RETURN_IF_ERROR(CheckPoint(x, "Log base point"));
  TANDEM_RETURN_IF_ERROR(CheckPoint(y, "Log target point"));
  if (x.size() != y.size()) {
    return absl::InvalidArgumentError("Log: points of different dimensions");
  }
  const double xy = MinkowskiDot(x, y);
  std::vector<double> w(y.begin(), y.end());
  for (size_t i = 0; i < w.size(); ++i) w[i] += (xy / k_) * x[i];
  const double nw = std::sqrt(std::max(MinkowskiDot(w, w), 0.0));
  if (nw == 0) return std::vector<double>(x.size(), 0.0);
  const double z = std::max(-xy / k_, 1.0);
  const double dist = std::sqrt(k_) * std::acosh(z);
  for (double& v : w) v *= dist / nw;
  return w;
}

absl::StatusOr<double> LorentzModel::Distance(absl::Span<const double> x,
                                              absl::Span<const double> y) const {
  TANDEM_RETURN_IF_ERROR(CheckPoint(x, "Distance point x"));
  TANDEM_RETURN_IF_ERROR(CheckPoint(y, "Distance point y"));
  if (x.size() != y.size()) {
    return absl::InvalidArgumentError("Distance: points of different dimensions");
  }
  const double z = -MinkowskiDot(x, y) / k_;
  return std::sqrt(k_) * std::log(z + std::sqrt(std::max(z * z - 1.0, kAcoshFloor)));
}

std::vector<double> LorentzModel::Exp0(absl::Span<const double> f) const {
  const Exp0Scale e = ScaleOf(f, k_);
  std::vector<double> x(f.size() + 1);
  double y2 = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    x[i + 1] = e.s * f[i];
    y2 += x[i + 1] * x[i + 1];
  }
  x[0] = std::sqrt(k_ + y2);
  return x;
}

absl::StatusOr<std::vector<double>> LorentzModel::Log0(absl::Span<const double> x) const {
  TANDEM_RETURN_IF_ERROR(CheckPoint(x, "Log0 point"));
  const absl::Span<const double> y = x.subspan(1);
  const double r = std::sqrt(Dot(y, y));
  std::vector<double> f(y.size(), 0.0);
  if (r == 0) return f;
  // On H, sinh(theta) = r / sqrt k, which is better conditioned than
  // arcosh(x_0 / sqrt k) for points near the origin.
  const double sk = std::sqrt(k_);
  const double scale = sk * std::asinh(r / sk) / r;
  for (size_t i = 0; i < y.size(); ++i) f[i] = scale * y[i];
  return f;
}

Matrix64 LorentzModel::Exp0Rows(const Matrix64& features) const {
  Matrix64 out{features.rows, features.cols + 1,
               std::vector<double>(static_cast<size_t>(features.rows * (features.cols + 1)))};
  tbb::parallel_for(int64_t{0}, features.rows, [&](int64_t r) {
    const std::vector<double> x = Exp0(features.row(r));
    std::copy(x.begin(), x.end(), out.data.begin() + r * out.cols);
  });
  return out;
}

absl::StatusOr<std::vector<double>> LorentzModel::Centroid(const Matrix64& points) const {
  if (points.rows < 1 || points.cols < 2) {
    return absl::InvalidArgumentError("Centroid needs at least one point of >= 2 coordinates");
  }
  for (int64_t r = 0; r < points.rows; ++r) {
    TANDEM_RETURN_IF_ERROR(CheckPoint(points.row(r), "Centroid input point"));
  }
  std::vector<double> m = MeanRow(points);
  const double a = std::max(std::fabs(MinkowskiDot(m, m)), kCentroidFloor);
  const double scale = std::sqrt(k_ / a);
  for (double& v : m) v *= scale;
  return m;
}

absl::StatusOr<HddLoss64> HddCentroidLoss64(const Matrix64& real, const Matrix64& synthetic,
                                            const HddLossOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(const LorentzModel model, LorentzModel::Create(options.k));
  TANDEM_RETURN_IF_ERROR(ValidateFeatures(real, "HDD real features"));
  TANDEM_RETURN_IF_ERROR(ValidateFeatures(synthetic, "HDD synthetic features"));
  if (real.cols != synthetic.cols) {
    return absl::InvalidArgumentError(absl::StrCat("HDD feature dims differ: real D=", real.cols,
                                                   ", synthetic D=", synthetic.cols));
  }
  if (!std::isfinite(options.lambda) || options.lambda < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HDD lambda must be finite and >= 0, got ", options.lambda));
  }
  const double k = options.k, sk = std::sqrt(k);
  const int64_t dim = real.cols + 1;
  const std::vector<double> mr = MeanRow(model.Exp0Rows(real));
  const std::vector<double> ms = MeanRow(model.Exp0Rows(synthetic));
  auto centroid = [&](const std::vector<double>& m, double* a_out, double* q_out) {
    const double q = MinkowskiDot(m, m);
    const double a = std::max(std::fabs(q), kCentroidFloor);
    std::vector<double> c(m);
    for (double& v : c) v *= sk / std::sqrt(a);
    *a_out = a;
    *q_out = q;
    return c;
  };
  double ar, qr, as, qs;
  const std::vector<double> cr = centroid(mr, &ar, &qr);
  const std::vector<double> cs = centroid(ms, &as, &qs);

  // Forward: d = sqrt k log(z + r), r = sqrt(max(z^2 - 1, floor)).
  const double z = -MinkowskiDot(cr, cs) / k;
  const double z2m1 = z * z - 1.0;
  const bool floor_active = !(z2m1 > kAcoshFloor);
  const double r = std::sqrt(floor_active ? kAcoshFloor : z2m1);
  HddLoss64 out;
  out.distance = sk * std::log(z + r);
  out.loss = options.lambda * out.distance;

  // Backward, in float64 (see hdd.h).
  const double dd_dz = sk * (1.0 + (floor_active ? 0.0 : z / r)) / (z + r);
  const double gz = options.lambda * dd_dz;
  std::vector<double> g_c(static_cast<size_t>(dim));  // dz/dc_s = -(1/k) J c_r
  for (int64_t i = 0; i < dim; ++i) g_c[i] = gz * (i == 0 ? cr[0] : -cr[i]) / k;
  // c = sqrt k m a^{-1/2}: g_m = sqrt k [a^{-1/2} g_c - a^{-3/2} (g_c . m) (da/dm) / 2],
  // da/dm = sign(q) 2 J m when |q| > floor, else 0.
  const double gm_dot = Dot(g_c, ms);
  const double da_coef = std::fabs(qs) > kCentroidFloor ? (qs < 0 ? -2.0 : 2.0) : 0.0;
  std::vector<double> g_x(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) {
    const double jm = i == 0 ? -ms[0] : ms[i];
    const double gm = sk * (g_c[i] / std::sqrt(as) - 0.5 * gm_dot * da_coef * jm / (as * std::sqrt(as)));
    g_x[i] = gm / static_cast<double>(synthetic.rows);  // m = mean of the points
  }
  out.grad_synthetic = Matrix64{synthetic.rows, synthetic.cols,
                                std::vector<double>(synthetic.data.size())};
  tbb::parallel_for(int64_t{0}, synthetic.rows, [&](int64_t row) {
    Exp0Backward(synthetic.row(row), g_x, k, out.grad_synthetic.data.data() + row * synthetic.cols);
  });
  return out;
}

absl::StatusOr<HddLossResult> HddCentroidLoss(const Tensor& real, const Tensor& synthetic,
                                              const HddLossOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckRank(real, 2, "HDD real features"));
  TANDEM_RETURN_IF_ERROR(CheckRank(synthetic, 2, "HDD synthetic features"));
  TANDEM_ASSIGN_OR_RETURN(const Matrix64 r, Matrix64::FromTensor(real));
  TANDEM_ASSIGN_OR_RETURN(const Matrix64 s, Matrix64::FromTensor(synthetic));
  TANDEM_ASSIGN_OR_RETURN(HddLoss64 l, HddCentroidLoss64(r, s, options));
  HddLossResult out;
  out.loss = l.loss;
  out.distance = l.distance;
  out.grad_synthetic = ToTensor(synthetic.shape(), l.grad_synthetic.data);
  return out;
}

absl::StatusOr<HddDistillResult> HddDistillStep(const Tensor& real, const Tensor& synthetic,
                                                const Tensor& velocity,
                                                const HddDistillOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckRank(real, 3, "HDD real samples"));
  TANDEM_RETURN_IF_ERROR(CheckRank(synthetic, 3, "HDD synthetic samples"));
  if (real.dim(0) != synthetic.dim(0) || real.dim(2) != synthetic.dim(2) ||
      velocity.shape() != synthetic.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HDD distill step needs real (C, n_r, D), synthetic and velocity (C, n_s, D); got ",
        real.ShapeString(), ", ", synthetic.ShapeString(), ", ", velocity.ShapeString()));
  }
  if (!std::isfinite(options.lr) || options.lr < 0 || !std::isfinite(options.momentum) ||
      options.momentum < 0 || options.embed_dim < 0 || options.embed_dim > kMaxEmbedDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HDD distill step needs lr >= 0, momentum >= 0 and embed_dim in [0, ", kMaxEmbedDim,
        "]; got lr=", options.lr, " momentum=", options.momentum, " embed_dim=",
        options.embed_dim));
  }
  for (float v : velocity.data()) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("HDD velocity has a non-finite value");
  }
  const int64_t classes = real.dim(0), nr = real.dim(1), ns = synthetic.dim(1);
  const int64_t din = real.dim(2);
  const int64_t e = options.embed_dim == 0 ? din : options.embed_dim;
  RowMat w;
  if (options.embed_dim > 0) {
    std::mt19937_64 gen(options.embed_seed);
    std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(static_cast<double>(din)));
    w.resize(din, e);
    for (int64_t i = 0; i < w.size(); ++i) w.data()[i] = normal(gen);
  }
  auto embed = [&](const Tensor& t, int64_t c, int64_t n) {
    const float* p = t.ptr() + c * n * din;
    RowMat x = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                              Eigen::RowMajor>>(p, n, din)
                   .cast<double>();
    if (options.embed_dim > 0) x = x * w;
    return Matrix64{n, e, std::vector<double>(x.data(), x.data() + x.size())};
  };
  HddDistillResult out;
  out.synthetic = synthetic;
  out.velocity = velocity;
  for (int64_t c = 0; c < classes; ++c) {
    TANDEM_ASSIGN_OR_RETURN(HddLoss64 l,
                            HddCentroidLoss64(embed(real, c, nr), embed(synthetic, c, ns),
                                              options.loss));
    out.loss += l.loss;
    RowMat g = Eigen::Map<const RowMat>(l.grad_synthetic.data.data(), ns, e);
    if (options.embed_dim > 0) g = g * w.transpose();
    float* x = out.synthetic.mutable_ptr() + c * ns * din;
    float* v = out.velocity.mutable_ptr() + c * ns * din;
    for (int64_t i = 0; i < ns * din; ++i) {
      const double vn = options.momentum * v[i] + g.data()[i];
      v[i] = static_cast<float>(vn);
      x[i] = static_cast<float>(x[i] - options.lr * vn);
    }
  }
  return out;
}

}  // namespace tandem::ml::kernels::distill
