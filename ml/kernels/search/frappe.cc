#include "ml/kernels/search/frappe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels::search {
namespace {

double Dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

absl::Status CheckMeans(absl::Span<const double> means, int64_t k, const PreferenceCone& cone) {
  if (k < 1 || static_cast<int64_t>(means.size()) != k * cone.dim()) {
    return absl::InvalidArgumentError(absl::StrCat("means must be K x L = ", k, " x ", cone.dim(),
                                                   ", got ", means.size(), " values"));
  }
  for (double v : means) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("means must be finite");
  }
  return absl::OkStatus();
}

bool Dominates(absl::Span<const double> means, int64_t j, int64_t i, const PreferenceCone& cone,
               std::vector<double>& diff) {
  const int64_t l = cone.dim();
  bool nonzero = false;
  for (int64_t c = 0; c < l; ++c) {
    diff[c] = means[j * l + c] - means[i * l + c];
    nonzero |= diff[c] != 0;
  }
  return nonzero && cone.Contains(diff);
}

double Harmonic(double a, double b) { return a + b > 0 ? a * b / (a + b) : 0.0; }

}  // namespace

absl::StatusOr<PreferenceCone> PreferenceCone::Create(int64_t dim, std::vector<double> a) {
  if (dim < 1 || dim > 64 || a.empty() || a.size() % dim != 0 ||
      static_cast<int64_t>(a.size()) / dim > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cone matrix must be m x L with 1 <= L <= 64 and 1 <= m <= 256, got ", a.size(),
        " entries for L = ", dim));
  }
  const int64_t m = static_cast<int64_t>(a.size()) / dim;
  for (int64_t r = 0; r < m; ++r) {
    double norm = 0;
    for (int64_t c = 0; c < dim; ++c) {
      if (!std::isfinite(a[r * dim + c])) return absl::InvalidArgumentError("cone matrix not finite");
      norm += a[r * dim + c] * a[r * dim + c];
    }
    if (norm == 0) return absl::InvalidArgumentError(absl::StrCat("cone matrix row ", r, " is zero"));
  }
  bool orthant = m == dim;
  for (int64_t r = 0; orthant && r < m; ++r)
    for (int64_t c = 0; c < dim; ++c) orthant &= a[r * dim + c] == (r == c ? 1.0 : 0.0);
  return PreferenceCone(dim, m, std::move(a), orthant);
}

absl::StatusOr<PreferenceCone> PreferenceCone::Orthant(int64_t dim) {
  if (dim < 1 || dim > 64) {
    return absl::InvalidArgumentError(absl::StrCat("orthant dimension must be in [1, 64], got ", dim));
  }
  std::vector<double> a(dim * dim, 0.0);
  for (int64_t i = 0; i < dim; ++i) a[i * dim + i] = 1;
  return Create(dim, std::move(a));
}

bool PreferenceCone::Contains(absl::Span<const double> x, double tol) const {
  for (int64_t r = 0; r < m_; ++r) {
    if (Dot(&a_[r * dim_], x.data(), dim_) < -tol) return false;
  }
  return true;
}

double PreferenceCone::DistanceSquaredTo(absl::Span<const double> x) const {
  if (Contains(x)) return 0;
  if (orthant_) {
    double s = 0;
    for (double v : x) s += v < 0 ? v * v : 0;
    return s;
  }
  // Dykstra: x_{r} = P_r(x_{r-1} + p_r), p_r = x_{r-1} + p_r - x_r.
  std::vector<double> cur(x.begin(), x.end()), inc(m_ * dim_, 0.0), y(dim_);
  std::vector<double> norms(m_);
  for (int64_t r = 0; r < m_; ++r) norms[r] = Dot(&a_[r * dim_], &a_[r * dim_], dim_);
  for (int sweep = 0; sweep < 100000; ++sweep) {
    double change = 0;
    for (int64_t r = 0; r < m_; ++r) {
      double* p = &inc[r * dim_];
      for (int64_t c = 0; c < dim_; ++c) y[c] = cur[c] + p[c];
      const double viol = Dot(&a_[r * dim_], y.data(), dim_);
      for (int64_t c = 0; c < dim_; ++c) {
        const double next = viol < 0 ? y[c] - viol / norms[r] * a_[r * dim_ + c] : y[c];
        p[c] = y[c] - next;
        change = std::max(change, std::fabs(next - cur[c]));
        cur[c] = next;
      }
    }
    if (change < 1e-12) break;
  }
  double s = 0;
  for (int64_t c = 0; c < dim_; ++c) s += (x[c] - cur[c]) * (x[c] - cur[c]);
  return s;
}

double PreferenceCone::DistanceSquaredToComplement(absl::Span<const double> x) const {
  double best = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < m_; ++r) {
    const double v = Dot(&a_[r * dim_], x.data(), dim_);
    if (v < 0) return 0;
    best = std::min(best, v * v / Dot(&a_[r * dim_], &a_[r * dim_], dim_));
  }
  return best;
}

absl::StatusOr<std::vector<int64_t>> ParetoSet(absl::Span<const double> means, int64_t k,
                                               const PreferenceCone& cone) {
  TANDEM_RETURN_IF_ERROR(CheckMeans(means, k, cone));
  std::vector<double> diff(cone.dim());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < k; ++i) {
    bool dominated = false;
    for (int64_t j = 0; j < k && !dominated; ++j) {
      dominated = j != i && Dominates(means, j, i, cone, diff);
    }
    if (!dominated) out.push_back(i);
  }
  return out;
}

absl::StatusOr<FrappeObjective> FrappeObjective::Create(absl::Span<const double> means, int64_t k,
                                                        const PreferenceCone& cone, double sigma) {
  if (!(sigma > 0) || k < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("FraPPE needs K >= 2 arms and sigma > 0, got K = ", k, ", sigma = ", sigma));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> pareto, ParetoSet(means, k, cone));
  const int64_t l = cone.dim();
  const double scale = 1.0 / (2 * sigma * sigma);
  std::vector<bool> in_p(k, false);
  for (int64_t i : pareto) in_p[i] = true;
  std::vector<Piece> pieces;
  std::vector<double> diff(l);
  for (int64_t i = 0; i < k; ++i) {
    if (in_p[i]) {
      // (a) i becomes dominated by some j.
      for (int64_t j = 0; j < k; ++j) {
        if (j == i) continue;
        for (int64_t c = 0; c < l; ++c) diff[c] = means[j * l + c] - means[i * l + c];
        pieces.push_back({i, j, scale * cone.DistanceSquaredTo(diff)});
      }
    } else {
      // (b) i stops being dominated: break its hardest Pareto dominator.
      Piece hardest{i, -1, -1};
      for (int64_t j : pareto) {
        if (!Dominates(means, j, i, cone, diff)) continue;
        const double c = scale * cone.DistanceSquaredToComplement(diff);
        if (c > hardest.cost) hardest = {i, j, c};
      }
      if (hardest.j >= 0) pieces.push_back(hardest);
    }
  }
  return FrappeObjective(k, std::move(pareto), std::move(pieces));
}

double FrappeObjective::Value(absl::Span<const double> w, int64_t* active) const {
  double best = std::numeric_limits<double>::infinity();
  int64_t arg = -1;
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const Piece& pc = pieces_[p];
    const double v = pc.cost * Harmonic(w[pc.i], w[pc.j]);
    if (v < best) {
      best = v;
      arg = static_cast<int64_t>(p);
    }
  }
  if (active != nullptr) *active = arg;
  return arg < 0 ? 0.0 : best;
}

absl::StatusOr<FrankWolfeResult> FrankWolfe(const FrappeObjective& f, int64_t iterations,
                                            std::vector<double> w, int64_t offset) {
  const int64_t k = f.arms();
  if (iterations < 0 || iterations > 100000000 || offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Frank-Wolfe iterations must be in [0, 1e8], got ", iterations));
  }
  if (w.empty()) w.assign(k, 1.0 / k);
  double total = 0;
  bool ok = static_cast<int64_t>(w.size()) == k;
  for (double v : w) {
    ok &= v >= 0 && std::isfinite(v);
    total += v;
  }
  if (!ok || std::fabs(total - 1) > 1e-9) {
    return absl::InvalidArgumentError("Frank-Wolfe start must be a point of the K-simplex");
  }
  for (int64_t t = 0; t < iterations; ++t) {
    int64_t active = -1;
    f.Value(w, &active);
    if (active < 0) break;  // no alternative: the objective is +inf
    const FrappeObjective::Piece& pc = f.pieces()[active];
    // Supergradient of c h(w_i, w_j): c w_j^2 / s^2 on i, c w_i^2 / s^2 on j.
    const double wi = w[pc.i], wj = w[pc.j];
    const int64_t vertex = wj * wj >= wi * wi ? pc.i : pc.j;
    const double gamma = 1.0 / static_cast<double>(t + offset + 2);
    for (double& v : w) v *= 1 - gamma;
    w[vertex] += gamma;
  }
  FrankWolfeResult r;
  r.value = f.Value(w);
  r.w = std::move(w);
  return r;
}

}  // namespace tandem::ml::kernels::search
