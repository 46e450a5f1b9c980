// Seeded k-means (k-means++ initialisation, Arthur & Vassilvitskii 2007, then
// Lloyd iterations) over the rows of a matrix. Pure function.
#ifndef TANDEM_ML_COIDO_KMEANS_H_
#define TANDEM_ML_COIDO_KMEANS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/model/layer.h"

namespace tandem::ml {

struct KMeansResult {
  Matrix centroids;             // k x dim
  std::vector<int> assignment;  // cluster of each row
  double inertia = 0;           // sum of squared distances to the centroid
  int iterations = 0;
};

// INVALID_ARGUMENT when k < 1, k > rows, max_iters < 1 or a value is not
// finite. An empty cluster is re-seeded with the point farthest from its
// centroid.
absl::StatusOr<KMeansResult> KMeans(const Matrix& points, int k, int max_iters, uint64_t seed);

}  // namespace tandem::ml

#endif  // TANDEM_ML_COIDO_KMEANS_H_
