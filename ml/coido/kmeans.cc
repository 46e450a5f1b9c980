#include "ml/coido/kmeans.h"

#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {
double Uniform01(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }
}  // namespace

absl::StatusOr<KMeansResult> KMeans(const Matrix& x, int k, int max_iters, uint64_t seed) {
  const Eigen::Index n = x.rows();
  if (k < 1 || k > n || max_iters < 1) {
    return absl::InvalidArgumentError(absl::StrCat("kmeans: need 1 <= k <= rows (", n,
                                                   ") and max_iters >= 1; got k=", k));
  }
  if (!x.allFinite()) return absl::InvalidArgumentError("kmeans: non-finite input");
  std::mt19937_64 gen(seed);
  KMeansResult r;
  r.centroids.resize(k, x.cols());
  // k-means++: first centre uniform, then proportional to D^2.
  std::vector<double> d2(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
  Eigen::Index first = static_cast<Eigen::Index>(gen() % static_cast<uint64_t>(n));
  r.centroids.row(0) = x.row(first);
  for (int c = 1; c <= k; ++c) {
    double total = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      d2[i] = std::min(d2[i], double{(x.row(i) - r.centroids.row(c - 1)).squaredNorm()});
      total += d2[i];
    }
    if (c == k) break;
    double u = Uniform01(gen) * total, cum = 0;
    Eigen::Index pick = n - 1;
    for (Eigen::Index i = 0; i < n; ++i) {
      cum += d2[i];
      if (u < cum) {
        pick = i;
        break;
      }
    }
    r.centroids.row(c) = x.row(pick);
  }
  r.assignment.assign(static_cast<size_t>(n), -1);
  const Eigen::VectorXf xnorm = x.rowwise().squaredNorm();
  for (int it = 0; it < max_iters; ++it) {
    r.iterations = it + 1;
    // Distances via ||x||^2 - 2 x.c + ||c||^2 (one GEMM).
    const Matrix dots = x * r.centroids.transpose();
    const Eigen::RowVectorXf cnorm = r.centroids.rowwise().squaredNorm().transpose();
    bool changed = false;
    r.inertia = 0;
    std::vector<double> dist(static_cast<size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i) {
      Eigen::Index best = 0;
      float bd = std::numeric_limits<float>::infinity();
      for (int c = 0; c < k; ++c) {
        const float d = xnorm[i] - 2 * dots(i, c) + cnorm[c];
        if (d < bd) {
          bd = d;
          best = c;
        }
      }
      if (r.assignment[i] != best) changed = true;
      r.assignment[i] = static_cast<int>(best);
      dist[i] = std::max(0.0f, bd);
      r.inertia += dist[i];
    }
    Matrix sums = Matrix::Zero(k, x.cols());
    std::vector<int64_t> counts(static_cast<size_t>(k), 0);
    for (Eigen::Index i = 0; i < n; ++i) {
      sums.row(r.assignment[i]) += x.row(i);
      ++counts[r.assignment[i]];
    }
    for (int c = 0; c < k; ++c) {
      if (counts[c] > 0) {
        r.centroids.row(c) = sums.row(c) / static_cast<float>(counts[c]);
        continue;
      }
      Eigen::Index far = 0;
      for (Eigen::Index i = 1; i < n; ++i) far = dist[i] > dist[far] ? i : far;
      r.centroids.row(c) = x.row(far);
      dist[far] = 0;
      changed = true;
    }
    if (!changed) break;
  }
  return r;
}

}  // namespace tandem::ml
