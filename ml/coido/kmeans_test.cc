#include "ml/coido/kmeans.h"

#include <random>
#include <set>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

Matrix Blobs(int per, std::mt19937_64& gen) {
  std::normal_distribution<float> nd(0.0f, 0.3f);
  const float centres[3][2] = {{0, 0}, {10, 0}, {0, 10}};
  Matrix x(3 * per, 2);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < per; ++i) {
      x(c * per + i, 0) = centres[c][0] + nd(gen);
      x(c * per + i, 1) = centres[c][1] + nd(gen);
    }
  }
  return x;
}

TEST(KMeans, RecoversSeparatedBlobsDeterministically) {
  std::mt19937_64 gen(1);
  const Matrix x = Blobs(50, gen);
  TANDEM_ASSERT_OK_AND_ASSIGN(KMeansResult r, KMeans(x, 3, 50, 7));
  for (int c = 0; c < 3; ++c) {
    std::set<int> ids;
    for (int i = 0; i < 50; ++i) ids.insert(r.assignment[c * 50 + i]);
    EXPECT_EQ(ids.size(), 1u) << "blob " << c << " split";
  }
  std::set<int> all(r.assignment.begin(), r.assignment.end());
  EXPECT_EQ(all.size(), 3u);
  EXPECT_LT(r.inertia / 150.0, 0.3);  // ~2 * 0.3^2 per point
  TANDEM_ASSERT_OK_AND_ASSIGN(KMeansResult again, KMeans(x, 3, 50, 7));
  EXPECT_EQ(r.assignment, again.assignment);
}

TEST(KMeans, Validation) {
  Matrix x(4, 2);
  x.setZero();
  EXPECT_THAT(KMeans(x, 0, 10, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(KMeans(x, 5, 10, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(KMeans(x, 2, 0, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  x(0, 0) = NAN;
  EXPECT_THAT(KMeans(x, 2, 10, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  // Identical points: every cluster stays defined.
  Matrix same = Matrix::Ones(6, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(KMeansResult r, KMeans(same, 3, 10, 1));
  EXPECT_NEAR(r.inertia, 0.0, 1e-9);
}

}  // namespace
}  // namespace tandem::ml
