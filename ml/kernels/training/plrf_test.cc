#include "ml/kernels/training/plrf.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::kernels::training {
namespace {

using ::tandem::testing::StatusIs;

std::unique_ptr<PlrfProblem> Problem(int64_t v, int64_t d, uint64_t seed = 3) {
  auto p = PlrfProblem::Create({.alpha = 1.0, .beta = 0.3, .v = v, .d = d, .seed = seed});
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(Plrf, InitialRiskIsTheClosedForm) {
  auto p = Problem(300, 60);
  TANDEM_ASSERT_OK_AND_ASSIGN(double r0, p->Risk(std::vector<float>(60, 0.0f)));
  // The data scales are held in float: agreement to float precision.
  EXPECT_NEAR(r0, p->InitialRisk(), 1e-7 * r0);
  double direct = 0;
  for (int j = 1; j <= 300; ++j) direct += 0.5 * std::pow(j, -2.6);
  EXPECT_NEAR(p->InitialRisk(), direct, 1e-12);
}

TEST(Plrf, RiskGradientMatchesFiniteDifferences) {
  auto p = Problem(80, 20);
  std::mt19937_64 gen(5);
  std::normal_distribution<float> n(0.0f, 0.5f);
  std::vector<float> th(20);
  for (float& x : th) x = n(gen);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> g, p->RiskGradient(th));
  for (int k = 0; k < 20; ++k) {
    const float h = 1e-2f;
    std::vector<float> a = th, b = th;
    a[k] += h;
    b[k] -= h;
    // P is quadratic, so the central difference is exact up to rounding.
    const double fd = (*p->Risk(a) - *p->Risk(b)) / (static_cast<double>(a[k]) - b[k]);
    EXPECT_NEAR(g[k], fd, 1e-4 * (1 + std::fabs(fd))) << k;
  }
}

// E[g_minibatch] = grad P: the Monte Carlo mean of many sampled gradients
// lies within 5 standard errors of the exact gradient in every coordinate.
TEST(Plrf, SampledGradientIsUnbiased) {
  auto p = Problem(50, 10);
  std::vector<float> th(10);
  for (int k = 0; k < 10; ++k) th[k] = 0.1f * (k - 5);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> exact, p->RiskGradient(th));
  std::mt19937_64 gen(9);
  const int kDraws = 20000;
  std::vector<double> sum(10, 0.0), sum2(10, 0.0);
  std::vector<float> g(10);
  for (int i = 0; i < kDraws; ++i) {
    TANDEM_ASSERT_OK(p->SampleGradient(th, 4, gen, absl::MakeSpan(g)));
    for (int k = 0; k < 10; ++k) {
      sum[k] += g[k];
      sum2[k] += static_cast<double>(g[k]) * g[k];
    }
  }
  for (int k = 0; k < 10; ++k) {
    const double mean = sum[k] / kDraws;
    const double se = std::sqrt((sum2[k] / kDraws - mean * mean) / kDraws);
    EXPECT_NEAR(mean, exact[k], 5 * se + 1e-7) << k;
  }
}

TEST(Plrf, OptimumZeroesTheGradientAndBoundsTheRisk) {
  auto p = Problem(120, 30);
  double min_risk = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> opt, p->Optimum(&min_risk));
  std::vector<float> th(opt.begin(), opt.end());
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> g, p->RiskGradient(th));
  for (double gk : g) EXPECT_NEAR(gk, 0.0, 1e-5);
  EXPECT_NEAR(*p->Risk(th), min_risk, 1e-6);
  EXPECT_LT(min_risk, p->InitialRisk());
  std::mt19937_64 gen(11);
  std::normal_distribution<float> n(0.0f, 0.05f);
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<float> q = th;
    for (float& x : q) x += n(gen);
    EXPECT_GT(*p->Risk(q), min_risk);
  }
}

TEST(Plrf, HyperparametersFollowTheAuthorsSchedule) {
  auto p = Problem(1000, 250);
  const double trace = p->TraceEstimate();
  const ml::DanaOptions c = DanaHyperparameters(*p, 1, ml::DanaSchedule::kConstant);
  EXPECT_DOUBLE_EQ(c.gamma2, 0.5 / trace);  // Tr K > 1 for alpha = 1
  EXPECT_DOUBLE_EQ(c.gamma3, 0.5 * c.gamma2 / 250);
  EXPECT_DOUBLE_EQ(c.delta, 4 + 2 * 1.3 / 2);
  EXPECT_DOUBLE_EQ(c.gamma1, 1.0);
  // A batch larger than Tr K saturates gamma2 at 0.5.
  EXPECT_DOUBLE_EQ(DanaHyperparameters(*p, 64, ml::DanaSchedule::kDecaying).gamma2, 0.5);
}

TEST(Plrf, SgdEqualsDanaWithZeroGamma3BitExactlyAndRunsAreSeeded) {
  auto p = Problem(200, 50);
  const PlrfRunOptions run{.steps = 300, .batch = 2, .momentum = 0.0, .log_points = 10};
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve sgd, RunPlrf(*p, PlrfOptimizer::kSgd, run));
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve sgdm0, RunPlrf(*p, PlrfOptimizer::kSgdMomentum, run));
  ASSERT_EQ(sgd.risk.size(), sgdm0.risk.size());
  EXPECT_EQ(sgd.steps.front(), 0);
  EXPECT_EQ(sgd.steps.back(), 300);
  for (size_t i = 0; i < sgd.risk.size(); ++i) EXPECT_EQ(sgd.risk[i], sgdm0.risk[i]) << i;
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve again, RunPlrf(*p, PlrfOptimizer::kSgd, run));
  EXPECT_EQ(again.risk, sgd.risk);
  EXPECT_LT(sgd.risk.back(), 0.5 * sgd.risk.front());
}

// The scaling claim on a seeded instance (spec section 5 (d), smaller): at
// the end of a fixed budget DANA-decaying's risk is below SGD-momentum's
// (same effective step) and below plain SGD's, and every curve stays above
// the closed-form minimum.
TEST(Plrf, DanaDecayingBeatsSgdMomentumAtTheEndOfTheBudget) {
  auto p = Problem(1000, 250, 7);
  double min_risk = 0;
  TANDEM_ASSERT_OK(p->Optimum(&min_risk).status());
  const PlrfRunOptions run{.steps = 4000, .batch = 1, .momentum = 0.9, .sample_seed = 21,
                           .log_points = 5};
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve dana, RunPlrf(*p, PlrfOptimizer::kDanaDecaying, run));
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve sgdm, RunPlrf(*p, PlrfOptimizer::kSgdMomentum, run));
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfCurve sgd, RunPlrf(*p, PlrfOptimizer::kSgd, run));
  EXPECT_LT(dana.risk.back(), 0.8 * sgdm.risk.back())
      << "dana " << dana.risk.back() << " sgd-m " << sgdm.risk.back();
  EXPECT_LT(dana.risk.back(), 0.8 * sgd.risk.back());
  for (const PlrfCurve* c : {&dana, &sgdm, &sgd}) EXPECT_GT(c->risk.back(), min_risk);
}

TEST(Plrf, LogSpacedStepsAreSortedUniqueAndBracketed) {
  const std::vector<int64_t> s = LogSpacedSteps(1000, 20);
  EXPECT_EQ(s.front(), 0);
  EXPECT_EQ(s.back(), 1000);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i - 1], s[i]);
  EXPECT_GE(s.size(), 15u);
  EXPECT_EQ(LogSpacedSteps(1, 5), (std::vector<int64_t>{0, 1}));
}

TEST(Plrf, RejectsBadArguments) {
  EXPECT_THAT(PlrfProblem::Create({.alpha = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlrfProblem::Create({.v = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlrfProblem::Create({.v = 1 << 20, .d = 1 << 20}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto p = Problem(20, 5);
  EXPECT_THAT(p->Risk(std::vector<float>(4)), StatusIs(absl::StatusCode::kInvalidArgument));
  std::mt19937_64 gen(1);
  std::vector<float> g(5);
  EXPECT_THAT(p->SampleGradient(std::vector<float>(5), 0, gen, absl::MakeSpan(g)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunPlrf(*p, PlrfOptimizer::kSgd, {.steps = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunPlrf(*p, PlrfOptimizer::kSgdMomentum, {.momentum = 1.0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParsePlrfOptimizer("adam"), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(PlrfOptimizer k, ParsePlrfOptimizer("dana_constant"));
  EXPECT_EQ(k, PlrfOptimizer::kDanaConstant);
}

}  // namespace
}  // namespace tandem::ml::kernels::training
