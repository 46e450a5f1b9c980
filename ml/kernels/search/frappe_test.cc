#include "ml/kernels/search/frappe.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/search/frappe_sim.h"

namespace tandem::ml::kernels::search {
namespace {

using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;

// Exact projection onto {x : A x >= 0} by enumerating active sets: for every
// subset S of rows, project onto {a_r . x = 0, r in S} and keep the nearest
// feasible point (independent of Dykstra). Small m only.
double BruteForceDistance(const std::vector<double>& a, int64_t m, int64_t l,
                          const std::vector<double>& x) {
  double best = 1e300;
  for (int64_t mask = 0; mask < (1 << m); ++mask) {
    // Gram-Schmidt basis of span{a_r : r in S}, then x minus its projection.
    std::vector<std::vector<double>> basis;
    for (int64_t r = 0; r < m; ++r) {
      if (!(mask >> r & 1)) continue;
      std::vector<double> v(a.begin() + r * l, a.begin() + (r + 1) * l);
      for (const auto& b : basis) {
        double dot = 0;
        for (int64_t c = 0; c < l; ++c) dot += v[c] * b[c];
        for (int64_t c = 0; c < l; ++c) v[c] -= dot * b[c];
      }
      double n = 0;
      for (double e : v) n += e * e;
      if (n < 1e-18) continue;
      for (double& e : v) e /= std::sqrt(n);
      basis.push_back(v);
    }
    std::vector<double> p = x;
    for (const auto& b : basis) {
      double dot = 0;
      for (int64_t c = 0; c < l; ++c) dot += x[c] * b[c];
      for (int64_t c = 0; c < l; ++c) p[c] -= dot * b[c];
    }
    bool feasible = true;
    for (int64_t r = 0; r < m; ++r) {
      double dot = 0;
      for (int64_t c = 0; c < l; ++c) dot += a[r * l + c] * p[c];
      feasible &= dot >= -1e-9;
    }
    if (!feasible) continue;
    double d = 0;
    for (int64_t c = 0; c < l; ++c) d += (x[c] - p[c]) * (x[c] - p[c]);
    best = std::min(best, d);
  }
  return best;
}

TEST(PreferenceCone, DykstraMatchesExactProjections) {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> n(0, 1);
  // A = 2 I takes the Dykstra path; its cone is the orthant.
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone scaled, PreferenceCone::Create(3, {2, 0, 0, 0, 2, 0, 0, 0, 2}));
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone orthant, PreferenceCone::Orthant(3));
  const std::vector<double> a = {1, 0.5, 0, -0.3, 1, 0.2, 0.1, -0.4, 1, 0.3, 0.3, 0.3};
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone general, PreferenceCone::Create(3, a));
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> x = {n(gen), n(gen), n(gen)};
    double closed = 0;
    for (double v : x) closed += v < 0 ? v * v : 0;
    EXPECT_NEAR(orthant.DistanceSquaredTo(x), closed, 1e-12);
    EXPECT_NEAR(scaled.DistanceSquaredTo(x), closed, 1e-9);
    EXPECT_NEAR(general.DistanceSquaredTo(x), BruteForceDistance(a, 4, 3, x), 1e-8);
  }
  const std::vector<double> inside = {0.5, 2.0, 1.0};
  EXPECT_NEAR(orthant.DistanceSquaredToComplement(inside), 0.25, 1e-15);
  EXPECT_EQ(orthant.DistanceSquaredToComplement(std::vector<double>{-1, 1, 1}), 0);
}

TEST(PreferenceCone, RejectsBadMatrices) {
  EXPECT_THAT(PreferenceCone::Create(2, {1, 0, 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PreferenceCone::Create(2, {1, 0, 0, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("zero")));
  EXPECT_THAT(PreferenceCone::Orthant(0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParetoSet, OrthantAndTiltedCone) {
  // (3,1), (1,3), (2,2) are mutually non-dominated; (1,1) and (2,0.5) are dominated.
  const std::vector<double> m = {3, 1, 1, 3, 2, 2, 1, 1, 2, 0.5};
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone orthant, PreferenceCone::Orthant(2));
  EXPECT_THAT(ParetoSet(m, 5, orthant), IsOkAndHolds(std::vector<int64_t>{0, 1, 2}));
  // A wider pointed cone {x1 + 2 x2 >= 0, 2 x1 + x2 >= 0}: (0.2, -0.1) is
  // inside, so an extra arm (3.2, 0.9) dominates arm 0 there but not in R_+^2.
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone wide, PreferenceCone::Create(2, {1, 2, 2, 1}));
  EXPECT_TRUE(wide.Contains(std::vector<double>{0.2, -0.1}));
  EXPECT_FALSE(orthant.Contains(std::vector<double>{0.2, -0.1}));
  std::vector<double> m2 = m;
  m2.insert(m2.end(), {3.2, 0.9});
  EXPECT_THAT(ParetoSet(m2, 6, orthant), IsOkAndHolds(std::vector<int64_t>{0, 1, 2, 5}));
  EXPECT_THAT(ParetoSet(m2, 6, wide), IsOkAndHolds(std::vector<int64_t>{1, 2, 5}));
  EXPECT_THAT(ParetoSet(m2, 2, wide), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Frappe, TwoArmBestArmClosedForm) {
  // L = 1, C = R_+, K = 2, gap 0.8, sigma = 1: w* = (1/2, 1/2), T*^-1 = gap^2 / 8.
  const double gap = 0.8;
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone c, PreferenceCone::Orthant(1));
  TANDEM_ASSERT_OK_AND_ASSIGN(FrappeObjective f, FrappeObjective::Create({1.0, 1.0 - gap}, 2, c, 1.0));
  TANDEM_ASSERT_OK_AND_ASSIGN(FrankWolfeResult r, FrankWolfe(f, 5000));
  EXPECT_NEAR(r.w[0], 0.5, 1e-3);
  EXPECT_NEAR(r.value, gap * gap / 8, 1e-6);
}

TEST(Frappe, SingleObjectiveReducesToBestArmIdentification) {
  // For L = 1 the reduced objective equals Garivier-Kaufmann's Gaussian BAI
  // form min_{j != 1} w_1 w_j / (w_1 + w_j) (mu_1 - mu_j)^2 / (2 sigma^2).
  const std::vector<double> mu = {1.0, 0.7, 0.4, 0.2};
  const double sigma = 0.5;
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone c, PreferenceCone::Orthant(1));
  TANDEM_ASSERT_OK_AND_ASSIGN(FrappeObjective f, FrappeObjective::Create(mu, 4, c, sigma));
  EXPECT_EQ(f.pareto(), std::vector<int64_t>{0});
  std::mt19937_64 gen(2);
  std::gamma_distribution<double> g(1.0, 1.0);
  auto gk = [&](const std::vector<double>& w) {
    double best = 1e300;
    for (int j = 1; j < 4; ++j) {
      best = std::min(best, w[0] * w[j] / (w[0] + w[j]) * std::pow(mu[0] - mu[j], 2) /
                                (2 * sigma * sigma));
    }
    return best;
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> w(4);
    double s = 0;
    for (double& v : w) s += (v = g(gen));
    for (double& v : w) v /= s;
    EXPECT_NEAR(f.Value(w), gk(w), 1e-12);
  }
  // Frank-Wolfe reaches the max of the closed form (grid search, step 0.005
  // on the 3 hardest arms' simplex face plus the 4th arm at its optimum 0+).
  TANDEM_ASSERT_OK_AND_ASSIGN(FrankWolfeResult r, FrankWolfe(f, 200000));
  double sum = 0;
  for (double v : r.w) {
    EXPECT_GE(v, 0);
    sum += v;
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  double grid = 0;
  for (double a = 0.005; a < 1; a += 0.005)
    for (double b = 0.005; a + b < 1; b += 0.005)
      for (double d = 0; a + b + d < 1; d += 0.005) grid = std::max(grid, gk({a, b, 1 - a - b - d, d}));
  EXPECT_GT(r.value, grid * 0.995);
  EXPECT_LT(r.value, grid * 1.01);
}

TEST(Frappe, RejectsBadArguments) {
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone c, PreferenceCone::Orthant(2));
  EXPECT_THAT(FrappeObjective::Create({1, 2, 3, 4}, 2, c, 0.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FrappeObjective::Create({1, 2}, 1, c, 1.0), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(FrappeObjective f, FrappeObjective::Create({1, 2, 2, 1}, 2, c, 1.0));
  EXPECT_THAT(FrankWolfe(f, 10, {0.7, 0.7}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FrankWolfe(f, -1), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FrappeSim, AdaptiveSamplingBeatsUniformOnAnUnbalancedInstance) {
  // Arm 3 (0.55, 0.55) is dominated by arm 2 (0.7, 0.7) by a small margin
  // (the hard pair); arms 4..6 are far below everything.
  const std::vector<double> m = {1, 0, 0, 1, 0.7, 0.7, 0.55, 0.55, -1, -1, -1.5, 0, 0, -1.5};
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone c, PreferenceCone::Orthant(2));
  EXPECT_THAT(ParetoSet(m, 7, c), IsOkAndHolds(std::vector<int64_t>{0, 1, 2}));
  BanditOptions o;
  o.delta = 0.05;
  o.seed = 100;
  o.fw_iterations = 100;
  TANDEM_ASSERT_OK_AND_ASSIGN(SamplerComparison cmp, CompareSamplers(m, 7, c, o, 6));
  EXPECT_EQ(cmp.frappe_error_rate, 0);
  EXPECT_EQ(cmp.uniform_error_rate, 0);
  EXPECT_LT(cmp.frappe_mean_samples, 0.8 * cmp.uniform_mean_samples)
      << cmp.frappe_mean_samples << " vs " << cmp.uniform_mean_samples;
  EXPECT_GT(cmp.lower_bound, 0);
}

TEST(FrappeSim, RejectsBadOptions) {
  TANDEM_ASSERT_OK_AND_ASSIGN(PreferenceCone c, PreferenceCone::Orthant(1));
  BanditOptions o;
  o.delta = 1.5;
  EXPECT_THAT(RunPureExploration({1, 0}, 2, c, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.delta = 0.1;
  o.max_samples = 1;
  EXPECT_THAT(RunPureExploration({1, 0}, 2, c, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.max_samples = 50;
  TANDEM_ASSERT_OK_AND_ASSIGN(BanditRun r, RunPureExploration({1, 0.999}, 2, c, o));
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.samples, 50);
}

}  // namespace
}  // namespace tandem::ml::kernels::search
