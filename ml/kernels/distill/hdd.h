// HDD: Hyperbolic Dataset Distillation (arXiv 2505.24623; kernels_research.md
// section 4). Features of real and synthetic samples of one class are mapped
// onto the Lorentz model of hyperbolic space, averaged into Lorentzian
// centroids, and the synthetic samples are moved so that the geodesic
// distance between the two centroids shrinks.
//
// Lorentz model with curvature parameter k > 0 (geoopt's convention,
// curvature -1/k): H = { x in R^{D+1} : <x,x>_L = -k, x_0 > 0 } with the
// Minkowski product <u,v>_L = -u_0 v_0 + sum_{i>=1} u_i v_i [F].
//   Exp_x(u) = cosh(|u|_L / sqrt k) x + sqrt k sinh(|u|_L / sqrt k) u / |u|_L
//   Log_x(y) = d(x,y) w / |w|_L,  w = y + (<x,y>_L / k) x
//   d(x,y)   = sqrt k arcosh(-<x,y>_L / k),
//              arcosh(z) = log(z + sqrt(max(z^2 - 1, 1e-15)))              [F]
//   Exp0(f)  = feature map of the paper: n = max(|f|, 1e-4),
//              theta = min(n / sqrt k, 10), y = sqrt k sinh(theta) f / n,
//              x = (sqrt(k + |y|^2), y)  (projx recomputes x_0)              [F]
//   centroid = sqrt k m / sqrt(max(|<m,m>_L|, 1e-8)),  m = mean_i x_i
//              (Law et al. closed form)                                     [F]
//   loss     = lambda d(c_real, c_syn), summed over classes by the caller  [F]
// All of it is computed in float64, as the spec requires. The gradients are
// the exact derivatives of these clamped formulas (zero where a clamp is
// active), checked against finite differences in hdd_test.cc.
//
// Thread safety: LorentzModel is an immutable value; every function is pure
// and may run concurrently. Heavy loops use the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_DISTILL_HDD_H_
#define TANDEM_ML_KERNELS_DISTILL_HDD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::distill {

// A row-major float64 matrix (rows x cols), owned. Used for Lorentz points
// (cols = D + 1) and float64 features (cols = D).
struct Matrix64 {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> data;

  absl::Span<const double> row(int64_t i) const {
    return absl::MakeConstSpan(data.data() + i * cols, static_cast<size_t>(cols));
  }
  // Float64 copy of a rank-2 tensor. INVALID_ARGUMENT unless t is rank 2.
  static absl::StatusOr<Matrix64> FromTensor(const Tensor& t);
};

// <u,v>_L. REQUIRES: u.size() == v.size() >= 1.
double MinkowskiDot(absl::Span<const double> u, absl::Span<const double> v);

class LorentzModel {
 public:
  // Feature-map clamps of the reference implementation [F].
  static constexpr double kMinNorm = 1e-4;
  static constexpr double kMaxTheta = 10.0;
  // Tolerance of CheckPoint: |<x,x>_L + k| <= kPointTolerance * (k + x_0^2).
  static constexpr double kPointTolerance = 1e-6;

  // INVALID_ARGUMENT unless k is finite and in [1e-6, 1e6].
  static absl::StatusOr<LorentzModel> Create(double k);

  double k() const { return k_; }

  // OK when x (size >= 2) lies on the hyperboloid (tolerance above) with
  // x_0 > 0 and finite coordinates; INVALID_ARGUMENT naming `what` otherwise.
  absl::Status CheckPoint(absl::Span<const double> x, const char* what) const;

  // Exp_x(u). u is first projected onto the tangent space at x,
  // u <- u + (<x,u>_L / k) x (a design choice [I]: the projection makes any
  // ambient vector usable and is the identity on tangent vectors).
  // INVALID_ARGUMENT when x is not a point, sizes differ or u is not finite.
  absl::StatusOr<std::vector<double>> Exp(absl::Span<const double> x,
                                          absl::Span<const double> u) const;
  // Log_x(y): the tangent vector at x with Exp_x(Log_x(y)) = y. Returns the
  // zero vector when y == x. INVALID_ARGUMENT as Exp, for x and y.
  absl::StatusOr<std::vector<double>> Log(absl::Span<const double> x,
                                          absl::Span<const double> y) const;
  // Geodesic distance; INVALID_ARGUMENT as Log.
  absl::StatusOr<double> Distance(absl::Span<const double> x, absl::Span<const double> y) const;

  // The paper's feature map (header comment), R^D -> H in R^{D+1}.
  // REQUIRES: f finite, size >= 1 (checked by the batch callers).
  std::vector<double> Exp0(absl::Span<const double> f) const;
  // Inverse of Exp0 where neither clamp is active: log at the origin,
  // sqrt k arcosh(x_0 / sqrt k) x_{1:} / |x_{1:}|. INVALID_ARGUMENT when x is
  // not a point.
  absl::StatusOr<std::vector<double>> Log0(absl::Span<const double> x) const;
  // Exp0 of every row: (n, D) -> (n, D + 1).
  Matrix64 Exp0Rows(const Matrix64& features) const;

  // Lorentzian centroid of the rows of `points` (n >= 1, each on H).
  // INVALID_ARGUMENT when empty or a row is not a point.
  absl::StatusOr<std::vector<double>> Centroid(const Matrix64& points) const;

 private:
  explicit LorentzModel(double k) : k_(k) {}
  double k_;
};

struct HddLossOptions {
  double k = 1.0;        // curvature parameter (DM-HDD default [F])
  double lambda = 20.0;  // loss scale (DM-HDD default [F])
};

struct HddLoss64 {
  double loss = 0;       // lambda * distance
  double distance = 0;   // d(c_real, c_syn)
  Matrix64 grad_synthetic;  // d loss / d synthetic features, (n_s, D)
};

// The geodesic centroid distance of one class, in float64:
//   loss = lambda d(centroid(Exp0(real)), centroid(Exp0(synthetic))).
// INVALID_ARGUMENT when either set is empty, feature dims differ, a value is
// not finite, k is outside LorentzModel's range or lambda is negative or not
// finite.
absl::StatusOr<HddLoss64> HddCentroidLoss64(const Matrix64& real, const Matrix64& synthetic,
                                            const HddLossOptions& options);

struct HddLossResult {
  double loss = 0;
  double distance = 0;
  Tensor grad_synthetic;  // (n_s, D), float32 copy of the float64 gradient
};

// Float32 front end of HddCentroidLoss64: real (n_r, D), synthetic (n_s, D).
absl::StatusOr<HddLossResult> HddCentroidLoss(const Tensor& real, const Tensor& synthetic,
                                              const HddLossOptions& options);

struct HddDistillOptions {
  HddLossOptions loss;
  double lr = 1.0;        // lr_img of DM-HDD [F]
  double momentum = 0.5;  // SGD momentum of DM-HDD [F]
  // Output width E of the frozen random linear embedding phi(x) = x W,
  // W (D_in, E) ~ N(0, 1/D_in) drawn from embed_seed. 0 = identity (the
  // samples are features already). A stand-in for the randomly initialised,
  // frozen ConvNet of the paper [I]: callers pass a fresh seed per iteration
  // as DM does; the kernel itself is deterministic.
  int64_t embed_dim = 0;
  uint64_t embed_seed = 0;
};

struct HddDistillResult {
  double loss = 0;    // sum over classes of lambda d_c, before the update
  Tensor synthetic;   // updated samples (C, n_s, D_in)
  Tensor velocity;    // updated momentum buffer (C, n_s, D_in)
};

// One distillation step over C classes (class-major tensors):
//   real (C, n_r, D_in), synthetic and velocity (C, n_s, D_in);
//   g = d/d synthetic sum_c lambda d_c;  v <- momentum v + g;
//   synthetic <- synthetic - lr v   (PyTorch SGD, no dampening).
// INVALID_ARGUMENT on shape mismatch, non-finite values, embed_dim outside
// [0, 65536], lr or momentum negative or not finite, or as HddCentroidLoss64.
absl::StatusOr<HddDistillResult> HddDistillStep(const Tensor& real, const Tensor& synthetic,
                                                const Tensor& velocity,
                                                const HddDistillOptions& options);

}  // namespace tandem::ml::kernels::distill

#endif  // TANDEM_ML_KERNELS_DISTILL_HDD_H_
