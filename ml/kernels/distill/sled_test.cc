#include "ml/kernels/distill/sled.h"

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::distill {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

Tensor Ones(int64_t n) {
  Tensor t = *Tensor::Zeros({n});
  for (float& v : t.mutable_data()) v = 1.0f;
  return t;
}

// E|X| for X ~ N(mu, sigma^2) (folded normal mean).
double FoldedMean(double mu, double sigma) {
  const double phi = 0.5 * std::erfc(mu / (sigma * std::numbers::sqrt2));  // Phi(-mu/sigma)
  return sigma * std::sqrt(2.0 / std::numbers::pi) * std::exp(-mu * mu / (2 * sigma * sigma)) +
         mu * (1.0 - 2.0 * phi);
}

TEST(SledEnergy, ExpectedLossIsMinimisedAtTheTrueDistribution) {
  // Data y ~ N(0, 1), model N(mu, 1), m = 2, beta = 1:
  // E[l] = 2 E|X - Y| - E|X - X'| = 2 FoldedMean(mu, sqrt 2) - 2 / sqrt(pi).
  constexpr int64_t kT = 200000;
  std::mt19937_64 gen(21);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> y(kT), e(2 * kT);
  for (float& v : y) v = n(gen);
  for (float& v : e) v = n(gen);
  const Tensor target = *Tensor::FromData({kT, 1}, y);
  const Tensor mask = Ones(kT);
  double best_mu = 0, best = INFINITY;
  for (double mu : {-0.5, -0.25, 0.0, 0.25, 0.5}) {
    std::vector<float> s(2 * kT);
    for (int64_t i = 0; i < 2 * kT; ++i) s[i] = static_cast<float>(mu + e[i]);  // common noise
    TANDEM_ASSERT_OK_AND_ASSIGN(EnergyLossResult r,
                                EnergyDistanceLoss(*Tensor::FromData({kT, 2, 1}, s), target, mask, {}));
    const double closed = 2 * FoldedMean(mu, std::numbers::sqrt2) - 2 / std::sqrt(std::numbers::pi);
    EXPECT_NEAR(r.loss, closed, 0.015) << "mu = " << mu;  // ~7 standard errors at T = 2e5
    if (r.loss < best) best = r.loss, best_mu = mu;
  }
  EXPECT_EQ(best_mu, 0.0);
  EXPECT_NEAR(2 * FoldedMean(0.0, std::numbers::sqrt2) - 2 / std::sqrt(std::numbers::pi),
              2 / std::sqrt(std::numbers::pi), 1e-12);
}

TEST(SledEnergy, PairGradientIsADifferenceOfUnitVectors) {
  const Tensor s = RandomTensor({1, 2, 5}, 1), y = RandomTensor({1, 5}, 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(EnergyLossResult r, EnergyDistanceLoss(s, y, Ones(1), {}));
  auto unit = [&](const float* a, const float* b, int64_t c) {
    double n = 0;
    for (int64_t i = 0; i < 5; ++i) n += (a[i] - b[i]) * (a[i] - b[i]);
    return (a[c] - b[c]) / std::sqrt(n);
  };
  const float *s1 = s.ptr(), *s2 = s.ptr() + 5;
  for (int64_t c = 0; c < 5; ++c) {
    EXPECT_NEAR(r.grad_samples.data()[c], unit(s1, y.ptr(), c) - unit(s1, s2, c), 1e-6);
    EXPECT_NEAR(r.grad_samples.data()[5 + c], unit(s2, y.ptr(), c) - unit(s2, s1, c), 1e-6);
  }
}

TEST(SledEnergy, GradientMatchesFiniteDifferences) {
  const Tensor y = RandomTensor({5, 4}, 3);
  Tensor mask = *Tensor::FromData({5}, {1.0f, 0.0f, 2.0f, 0.5f, 1.0f});
  for (double beta : {0.7, 1.0, 1.5}) {
    for (int64_t m : {2, 3}) {
      SCOPED_TRACE(beta);
      SCOPED_TRACE(m);
      const Tensor s = RandomTensor({5, m, 4}, 4 + m);
      const EnergyLossOptions o{.beta = beta};
      TANDEM_ASSERT_OK_AND_ASSIGN(EnergyLossResult r, EnergyDistanceLoss(s, y, mask, o));
      const float h = 1e-3f;
      for (int64_t i = 0; i < s.size(); ++i) {
        Tensor p = s, q = s;
        p.mutable_ptr()[i] += h;
        q.mutable_ptr()[i] -= h;
        const double fd = (EnergyDistanceLoss(p, y, mask, o)->loss - EnergyDistanceLoss(q, y, mask, o)->loss) /
                          (double{p.ptr()[i]} - q.ptr()[i]);
        EXPECT_NEAR(r.grad_samples.data()[i], fd, 1e-4) << "element " << i;
      }
      // Step 1 has weight 0: no gradient there.
      for (int64_t i = m * 4; i < 2 * m * 4; ++i) EXPECT_EQ(r.grad_samples.data()[i], 0.0f);
    }
  }
}

TEST(SledEnergy, MaskedMeanMatchesPerStepLosses) {
  const Tensor s = RandomTensor({3, 2, 2}, 8), y = RandomTensor({3, 2}, 9);
  double per[3];
  for (int64_t t = 0; t < 3; ++t) {
    Tensor one = *Tensor::Zeros({3});
    one.mutable_ptr()[t] = 1.0f;
    per[t] = EnergyDistanceLoss(s, y, one, {})->loss;
    auto dist = [](const float* a, const float* b) { return std::hypot(a[0] - b[0], a[1] - b[1]); };
    const float* st = s.ptr() + t * 4;
    EXPECT_NEAR(per[t], dist(st, y.ptr() + 2 * t) + dist(st + 2, y.ptr() + 2 * t) - dist(st, st + 2), 1e-6);
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(EnergyLossResult r,
                              EnergyDistanceLoss(s, y, *Tensor::FromData({3}, {1.0f, 3.0f, 0.0f}), {}));
  EXPECT_NEAR(r.loss, (per[0] + 3 * per[1]) / 4, 1e-6);
  TANDEM_ASSERT_OK_AND_ASSIGN(EnergyLossResult zero, EnergyDistanceLoss(s, y, *Tensor::Zeros({3}), {}));
  EXPECT_EQ(zero.loss, 0.0);
  for (float g : zero.grad_samples.data()) EXPECT_EQ(g, 0.0f);
}

TEST(SledEnergy, RejectsBadInput) {
  const Tensor s = RandomTensor({3, 2, 4}, 1), y = RandomTensor({3, 4}, 2);
  EXPECT_THAT(EnergyDistanceLoss(RandomTensor({3, 1, 4}, 1), y, Ones(3), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EnergyDistanceLoss(s, RandomTensor({3, 5}, 2), Ones(3), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EnergyDistanceLoss(s, y, Ones(2), {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EnergyDistanceLoss(s, y, *Tensor::FromData({3}, {1.0f, -1.0f, 1.0f}), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EnergyDistanceLoss(s, y, Ones(3), {.beta = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(EnergyDistanceLoss(s, y, Ones(3), {.beta = 2.5}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::distill
