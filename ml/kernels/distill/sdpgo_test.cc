#include "ml/kernels/distill/sdpgo.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::distill {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

constexpr int64_t kB = 4, kC = 6, kF = 10;

// Row-wise softmax(z / tau) as a float tensor.
Tensor SoftmaxRows(const Tensor& z, double tau) {
  Tensor p = z;
  const int64_t c = z.dim(1);
  for (int64_t r = 0; r < z.dim(0); ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, double{z.ptr()[r * c + j]});
    std::vector<double> e(static_cast<size_t>(c));
    for (int64_t j = 0; j < c; ++j) s += e[j] = std::exp((z.ptr()[r * c + j] - m) / tau);
    for (int64_t j = 0; j < c; ++j) p.mutable_ptr()[r * c + j] = static_cast<float>(e[j] / s);
  }
  return p;
}

struct Inputs {
  Tensor z = RandomTensor({kB, kC}, 1, 2.0f);
  std::vector<int64_t> y = {0, 3, 5, 2};
  Tensor f = RandomTensor({kB, kF}, 2), g = RandomTensor({kB, kF}, 3), fp = RandomTensor({kB, kF}, 4);
  Tensor q = SoftmaxRows(RandomTensor({kB, kC}, 5, 2.0f), 1.0);
};

TEST(SdpgoProx, SoftThresholdSatisfiesTheProxOptimalityCondition) {
  const Tensor x = RandomTensor({200}, 6);
  const double lambda = 0.4;
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, SoftThreshold(x, lambda));
  std::mt19937_64 gen(7);
  std::normal_distribution<double> n(0.0, 0.3);
  for (int64_t i = 0; i < x.size(); ++i) {
    const double xi = x.data()[i], yi = y.data()[i];
    // 0 in (y - x) + lambda d|y|: y != 0 => x - y = lambda sign(y); y == 0 => |x| <= lambda.
    if (yi != 0) {
      EXPECT_NEAR(xi - yi, lambda * (yi > 0 ? 1 : -1), 1e-6);
    } else {
      EXPECT_LE(std::fabs(xi), lambda + 1e-7);
    }
    auto obj = [&](double v) { return 0.5 * (v - xi) * (v - xi) + lambda * std::fabs(v); };
    for (int t = 0; t < 5; ++t) EXPECT_LE(obj(yi), obj(yi + n(gen)) + 1e-7);
  }
}

TEST(SdpgoProx, WeightsAreProportionalToAbsGradientWithoutThreshold) {
  const Tensor g = RandomTensor({kB, kF}, 8);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor w, GradientFeatureWeights(g, 0.0));
  for (int64_t r = 0; r < kB; ++r) {
    double s = 0;
    for (int64_t j = 0; j < kF; ++j) s += std::fabs(g.data()[r * kF + j]);
    for (int64_t j = 0; j < kF; ++j) EXPECT_NEAR(w.data()[r * kF + j] * s, std::fabs(g.data()[r * kF + j]), 1e-5);
  }
}

TEST(SdpgoProx, ThresholdZeroesSmallGradientsAndRowsStayNormalised) {
  Tensor g = RandomTensor({kB, kF}, 9);
  for (int64_t j = 0; j < kF; ++j) g.mutable_ptr()[j] = 0.1f;  // row 0: all below lambda
  const double lambda = 0.5;
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor w, GradientFeatureWeights(g, lambda));
  for (int64_t r = 0; r < kB; ++r) {
    double s = 0, raw = 0;
    for (int64_t j = 0; j < kF; ++j) {
      const double a = std::fabs(g.data()[r * kF + j]);
      if (a <= lambda) {
        EXPECT_EQ(w.data()[r * kF + j], 0.0f);
      }
      s += w.data()[r * kF + j];
      raw += std::max(a - lambda, 0.0);
    }
    EXPECT_NEAR(s, raw > 0 ? 1.0 : 0.0, 1e-6) << "row " << r;
  }
}

TEST(SdpgoKl, KlOfTheHistoryWithItselfVanishes) {
  Inputs in;
  const SdpgoOptions o{.temperature = 2.0, .alpha = 0.7, .beta = 0.0};
  in.q = SoftmaxRows(in.z, 2.0);
  TANDEM_ASSERT_OK_AND_ASSIGN(SdpgoResult r, SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, in.q, o));
  EXPECT_NEAR(r.kl, 0.0, 1e-7);
  // Only the cross-entropy gradient remains: (softmax(z) - e_y) / B.
  const Tensor p = SoftmaxRows(in.z, 1.0);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t j = 0; j < kC; ++j) {
      const double want = (p.data()[b * kC + j] - (j == in.y[b] ? 1.0 : 0.0)) / kB;
      EXPECT_NEAR(r.grad_logits.data()[b * kC + j], want, 1e-6);
    }
  EXPECT_NEAR(r.loss, r.ce, 1e-6);
}

TEST(SdpgoLoss, GradientsMatchFiniteDifferences) {
  Inputs in;
  const SdpgoOptions o{.temperature = 3.0, .alpha = 0.9, .beta = 1.7, .lambda = 0.3};
  TANDEM_ASSERT_OK_AND_ASSIGN(SdpgoResult r, SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, in.q, o));
  auto loss = [&](const Tensor& z, const Tensor& f) {
    return SdpgoLoss(z, in.y, f, in.g, in.fp, in.q, o)->loss;
  };
  const float h = 1e-2f;
  for (int64_t i = 0; i < in.z.size(); ++i) {
    Tensor p = in.z, m = in.z;
    p.mutable_ptr()[i] += h;
    m.mutable_ptr()[i] -= h;
    const double fd = (loss(p, in.f) - loss(m, in.f)) / (double{p.ptr()[i]} - m.ptr()[i]);
    EXPECT_NEAR(r.grad_logits.data()[i], fd, 1e-4) << "logit " << i;
  }
  for (int64_t i = 0; i < in.f.size(); ++i) {
    Tensor p = in.f, m = in.f;
    p.mutable_ptr()[i] += h;
    m.mutable_ptr()[i] -= h;
    const double fd = (loss(in.z, p) - loss(in.z, m)) / (double{p.ptr()[i]} - m.ptr()[i]);
    EXPECT_NEAR(r.grad_features.data()[i], fd, 1e-4) << "feature " << i;
  }
  EXPECT_NEAR(r.loss, r.ce + 0.9 * 9.0 * r.kl + 1.7 * r.feature, 1e-9);
  EXPECT_GT(r.kl, 1e-3);
  EXPECT_GT(r.feature, 1e-3);
}

// KL(q || p) + (1/eta) KL(q || h) for distributions (float64).
double ProxObjective(const std::vector<double>& q, const float* p, const float* h, double eta) {
  double s = 0;
  for (size_t j = 0; j < q.size(); ++j) {
    if (q[j] > 0) s += q[j] * (std::log(q[j] / p[j]) + std::log(q[j] / h[j]) / eta);
  }
  return s;
}

TEST(SdpgoRefine, ProximalPointIsTheOptimumOfTheKlObjective) {
  const Tensor p = SoftmaxRows(RandomTensor({kB, kC}, 10, 1.5f), 1.0);
  const Tensor h = SoftmaxRows(RandomTensor({kB, kC}, 11, 1.5f), 1.0);
  std::mt19937_64 gen(12);
  std::exponential_distribution<double> e(1.0);
  for (double eta : {0.3, 1.0, 4.0}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor q, ProximalTargetRefinement(p, h, eta));
    for (int64_t r = 0; r < kB; ++r) {
      std::vector<double> qr(q.data().begin() + r * kC, q.data().begin() + (r + 1) * kC);
      // KKT on the simplex: log q - a log p - b log h is constant across classes.
      const double a = eta / (1 + eta), b = 1 / (1 + eta);
      const double c0 = std::log(qr[0]) - a * std::log(p.data()[r * kC]) - b * std::log(h.data()[r * kC]);
      for (int64_t j = 1; j < kC; ++j) {
        EXPECT_NEAR(std::log(qr[j]) - a * std::log(p.data()[r * kC + j]) - b * std::log(h.data()[r * kC + j]),
                    c0, 1e-5);
      }
      const double best = ProxObjective(qr, p.ptr() + r * kC, h.ptr() + r * kC, eta);
      for (int t = 0; t < 50; ++t) {  // random points of the simplex are never better
        std::vector<double> other(static_cast<size_t>(kC));
        double s = 0;
        for (double& v : other) s += v = e(gen);
        for (double& v : other) v /= s;
        EXPECT_LE(best, ProxObjective(other, p.ptr() + r * kC, h.ptr() + r * kC, eta) + 1e-6);
      }
    }
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor keep, ProximalTargetRefinement(p, h, 0.0));
  for (int64_t i = 0; i < h.size(); ++i) EXPECT_NEAR(keep.data()[i], h.data()[i], 1e-7);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor replace, ProximalTargetRefinement(p, h, 1e7));
  for (int64_t i = 0; i < p.size(); ++i) EXPECT_NEAR(replace.data()[i], p.data()[i], 1e-5);
}

TEST(SdpgoRefine, StepRefinesTheHistoryTowardsTheTemperedPrediction) {
  Inputs in;
  const SdpgoOptions o{.temperature = 2.0, .eta = 1.0};
  TANDEM_ASSERT_OK_AND_ASSIGN(SdpgoResult r, SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, in.q, o));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor want, ProximalTargetRefinement(SoftmaxRows(in.z, 2.0), in.q, 1.0));
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.q_next.data()[i], want.data()[i], 1e-6);
}

TEST(SdpgoLoss, RejectsBadInput) {
  Inputs in;
  const SdpgoOptions o;
  EXPECT_THAT(SdpgoLoss(in.z, {0, 1, 2}, in.f, in.g, in.fp, in.q, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SdpgoLoss(in.z, {0, 1, 2, 6}, in.f, in.g, in.fp, in.q, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SdpgoLoss(in.z, in.y, in.f, RandomTensor({kB, kF + 1}, 1), in.fp, in.q, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, RandomTensor({kB, kC}, 1), o),
              StatusIs(absl::StatusCode::kInvalidArgument));  // not distributions
  EXPECT_THAT(SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, in.q, {.temperature = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SdpgoLoss(in.z, in.y, in.f, in.g, in.fp, in.q, {.alpha = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SoftThreshold(in.f, -0.1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ProximalTargetRefinement(in.q, in.q, NAN), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::distill
