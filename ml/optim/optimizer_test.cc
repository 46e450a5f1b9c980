#include "ml/optim/optimizer.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

// Ill-conditioned convex quadratic f(x) = 0.5 sum_i a_i (x_i - c_i)^2.
struct Quadratic {
  std::vector<float> a, c;
  explicit Quadratic(int n) {
    for (int i = 0; i < n; ++i) {
      a.push_back(std::pow(10.0f, -2.0f * i / (n - 1)));  // curvature 1 .. 0.01
      c.push_back(static_cast<float>(i % 3) - 1.0f);
    }
  }
  double Loss(const std::vector<float>& x) const {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += 0.5 * a[i] * (x[i] - c[i]) * (x[i] - c[i]);
    return s;
  }
  std::vector<float> Grad(const std::vector<float>& x) const {
    std::vector<float> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) g[i] = a[i] * (x[i] - c[i]);
    return g;
  }
};

double RunSteps(Optimizer& opt, const Quadratic& q, int steps) {
  std::vector<float> x(q.a.size(), 0.0f);
  for (int t = 0; t < steps; ++t) {
    EXPECT_THAT(opt.Step(absl::MakeSpan(x), q.Grad(x)), tandem::testing::IsOk());
  }
  return q.Loss(x);
}

TEST(Optimizers, AllConvergeOnAConvexQuadratic) {
  const Quadratic q(20);
  const double start = q.Loss(std::vector<float>(20, 0.0f));
  auto plain = *CreateSgd({.learning_rate = 0.5});
  auto momentum = *CreateSgd({.learning_rate = 0.5, .momentum = 0.9});
  auto adam = *CreateAdam({.learning_rate = 0.05});
  auto dana = *CreateDana({.gamma2 = 0.5, .gamma3 = 0.05});
  const double l_sgd = RunSteps(*plain, q, 300), l_mom = RunSteps(*momentum, q, 300);
  const double l_adam = RunSteps(*adam, q, 300), l_dana = RunSteps(*dana, q, 300);
  EXPECT_LT(l_mom, 1e-4 * start);
  EXPECT_LT(l_adam, 1e-3 * start);
  EXPECT_LT(l_dana, 1e-3 * start);
  // Momentum and DANA's extra momentum term beat plain SGD on the
  // ill-conditioned directions.
  EXPECT_LT(l_mom, l_sgd);
  EXPECT_LT(l_dana, l_sgd);
}

TEST(Dana, ZeroGamma3IsPlainSgdBitExactly) {
  const Quadratic q(8);
  auto sgd = *CreateSgd({.learning_rate = 0.3});
  auto dana = *CreateDana({.gamma2 = 0.3, .gamma3 = 0.0});
  std::vector<float> x1(8, 0.5f), x2(8, 0.5f);
  for (int t = 0; t < 50; ++t) {
    TANDEM_ASSERT_OK(sgd->Step(absl::MakeSpan(x1), q.Grad(x1)));
    TANDEM_ASSERT_OK(dana->Step(absl::MakeSpan(x2), q.Grad(x2)));
  }
  EXPECT_EQ(x1, x2);
}

TEST(Dana, FirstStepsFollowTheRecurrence) {
  // d = 1, gamma2 = 0.1, gamma3 = 0.5 * 0.1 / 1 = 0.05 (DANA-constant
  // default), delta = 2: Delta(0) = 1 -> y0 = g0; Delta(1) = 2/3 -> y1 = y0/3 + g1.
  auto dana = *CreateDana({.gamma2 = 0.1, .delta = 2.0});
  std::vector<float> x = {1.0f};
  TANDEM_ASSERT_OK(dana->Step(absl::MakeSpan(x), std::vector<float>{2.0f}));
  EXPECT_FLOAT_EQ(x[0], 1.0f - 0.1f * 2.0f - 0.05f * 2.0f);
  TANDEM_ASSERT_OK(dana->Step(absl::MakeSpan(x), std::vector<float>{1.0f}));
  const float y1 = 2.0f / 3.0f + 1.0f;
  EXPECT_NEAR(x[0], 0.7f - 0.1f - 0.05f * y1, 1e-6);
}

// Power-law random features (spec kernels_research.md section 5): with
// batch 1, DANA-decaying reaches a lower risk than SGD at the same step.
TEST(Dana, DecayingOutscalesSgdOnPowerLawRandomFeatures) {
  const int v = 1000, d = 250;
  const double alpha = 1.0, beta = 0.3;
  std::mt19937_64 gen(7);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> w(static_cast<size_t>(v) * d);  // W_jk ~ N(0, 1/d)
  for (double& x : w) x = nd(gen) / std::sqrt(static_cast<double>(d));
  auto risk = [&](const std::vector<float>& th) {
    double r = 0;
    for (int j = 0; j < v; ++j) {
      double wt = 0;
      for (int k = 0; k < d; ++k) wt += w[j * d + k] * th[k];
      const double diff = wt - std::pow(j + 1.0, -beta);
      r += 0.5 * std::pow(j + 1.0, -2 * alpha) * diff * diff;
    }
    return r;
  };
  double trace = 0;
  for (int j = 1; j <= v; ++j) trace += std::pow(j, -2 * alpha);
  const double gamma2 = 0.5 / trace;
  auto sgd = *CreateDana({.gamma2 = gamma2, .gamma3 = 0.0});
  auto dana = *CreateDana({.gamma2 = gamma2,
                           .delta = 4 + 2 * (alpha + beta) / (2 * alpha),
                           .alpha = alpha,
                           .schedule = DanaSchedule::kDecaying});
  std::vector<float> th_sgd(d, 0.0f), th_dana(d, 0.0f);
  EXPECT_NEAR(
      risk(th_sgd),
      [&] {
        double p0 = 0;
        for (int j = 1; j <= v; ++j) p0 += 0.5 * std::pow(j, -2 * alpha - 2 * beta);
        return p0;
      }(),
      1e-9);
  std::vector<double> x(v), f(d);
  for (int t = 0; t < 3000; ++t) {
    for (int j = 0; j < v; ++j) x[j] = std::pow(j + 1.0, -alpha) * nd(gen);
    double target = 0;
    for (int j = 0; j < v; ++j) target += x[j] * std::pow(j + 1.0, -beta);
    std::fill(f.begin(), f.end(), 0.0);
    for (int j = 0; j < v; ++j) {
      for (int k = 0; k < d; ++k) f[k] += w[j * d + k] * x[j];
    }
    for (auto* pair : {&th_sgd, &th_dana}) {
      double pred = 0;
      for (int k = 0; k < d; ++k) pred += f[k] * (*pair)[k];
      std::vector<float> g(d);
      for (int k = 0; k < d; ++k) g[k] = static_cast<float>(f[k] * (pred - target));
      TANDEM_ASSERT_OK((pair == &th_sgd ? sgd : dana)->Step(absl::MakeSpan(*pair), g));
    }
  }
  const double r_sgd = risk(th_sgd), r_dana = risk(th_dana);
  EXPECT_LT(r_dana, 0.8 * r_sgd) << "sgd " << r_sgd << " dana " << r_dana;
}

TEST(Optimizers, RejectBadOptionsAndSizeChanges) {
  EXPECT_THAT(CreateSgd({.learning_rate = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateSgd({.learning_rate = 0.1, .momentum = 1.0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateSgd({.learning_rate = 0.1, .nesterov = true}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateAdam({.beta2 = 1.0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateDana({.gamma2 = -1}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateDana({.delta = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  auto adam = *CreateAdam({});
  std::vector<float> x(3), g(3), g2(2);
  EXPECT_THAT(adam->Step(absl::MakeSpan(x), g2), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK(adam->Step(absl::MakeSpan(x), g));
  std::vector<float> x4(4), g4(4);
  EXPECT_THAT(adam->Step(absl::MakeSpan(x4), g4), StatusIs(absl::StatusCode::kInvalidArgument));
  adam->Reset();
  TANDEM_EXPECT_OK(adam->Step(absl::MakeSpan(x4), g4));
}

TEST(Adam, FirstStepMovesByLearningRateTimesSign) {
  auto adam = *CreateAdam({.learning_rate = 0.01});
  std::vector<float> x = {0.0f, 0.0f};
  TANDEM_ASSERT_OK(adam->Step(absl::MakeSpan(x), std::vector<float>{3.0f, -0.5f}));
  EXPECT_NEAR(x[0], -0.01, 1e-6);
  EXPECT_NEAR(x[1], 0.01, 1e-6);
}

// A checkpointed optimizer, restored into a fresh instance, continues
// bit-identically to the original (what a coordinator restart relies on).
TEST(Optimizers, RestoredStateContinuesBitIdentically) {
  std::vector<std::unique_ptr<Optimizer>> a, b;
  a.push_back(*CreateSgd({.learning_rate = 0.1, .momentum = 0.9}));
  b.push_back(*CreateSgd({.learning_rate = 0.1, .momentum = 0.9}));
  a.push_back(*CreateAdam({.learning_rate = 0.01}));
  b.push_back(*CreateAdam({.learning_rate = 0.01}));
  a.push_back(*CreateDana({.gamma2 = 0.05, .schedule = DanaSchedule::kDecaying}));
  b.push_back(*CreateDana({.gamma2 = 0.05, .schedule = DanaSchedule::kDecaying}));
  for (size_t k = 0; k < a.size(); ++k) {
    std::vector<float> x = {1.0f, -2.0f, 0.5f};
    auto grad = [&](int t) { return std::vector<float>{x[0] + 0.1f * t, 2 * x[1], -x[2]}; };
    for (int t = 0; t < 3; ++t) TANDEM_ASSERT_OK(a[k]->Step(absl::MakeSpan(x), grad(t)));
    TANDEM_ASSERT_OK(b[k]->RestoreState(a[k]->SaveState()));
    EXPECT_EQ(b[k]->steps(), 3);
    std::vector<float> y = x;
    for (int t = 3; t < 6; ++t) {
      const std::vector<float> g = grad(t);
      TANDEM_ASSERT_OK(a[k]->Step(absl::MakeSpan(x), g));
      TANDEM_ASSERT_OK(b[k]->Step(absl::MakeSpan(y), g));
    }
    EXPECT_EQ(x, y) << a[k]->name();
  }
  // A snapshot of another kind or size is refused.
  auto adam = *CreateAdam({});
  Optimizer::State bad = a[0]->SaveState();  // one buffer; Adam has two
  EXPECT_THAT(adam->RestoreState(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  Optimizer::State ragged = a[1]->SaveState();
  ragged.buffers[1].pop_back();
  EXPECT_THAT(adam->RestoreState(ragged), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The ranged Step (what GradientEngine::ApplyStep runs on several threads)
// gives bit-identically the single-range result, for uneven splits and
// ranges that start inside an Eigen block; Adam matches the scalar formula.
TEST(Optimizers, RangedStepMatchesSingleRangeAndTheFormula) {
  const int n = 1500;
  auto make = [](int k) -> std::unique_ptr<Optimizer> {
    if (k == 0) return *CreateSgd({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true});
    if (k == 1) return *CreateAdam({.learning_rate = 0.01});
    return *CreateDana({.gamma2 = 0.05});
  };
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  for (int k = 0; k < 3; ++k) {
    auto one = make(k), ranged = make(k);
    std::vector<float> x(n), y, m(n, 0.0f), v(n, 0.0f), ref;
    for (float& e : x) e = normal(gen);
    y = x;
    ref = x;
    std::vector<std::pair<size_t, size_t>> seen;
    for (int t = 0; t < 4; ++t) {
      std::vector<float> g(n);
      for (float& e : g) e = normal(gen);
      TANDEM_ASSERT_OK(one->Step(absl::MakeSpan(x), g));
      seen.clear();
      TANDEM_ASSERT_OK(ranged->Step(absl::MakeSpan(y), g, [&](size_t size, RangeBody body) {
        const size_t cuts[] = {0, 7, 700, 1100, size};
        for (size_t r = 0; r + 1 < std::size(cuts); ++r) {
          seen.emplace_back(cuts[r], cuts[r + 1]);
          body(cuts[r], cuts[r + 1]);
        }
      }));
      if (k == 1) {  // Kingma & Ba 2015, Algorithm 1, in double
        for (int i = 0; i < n; ++i) {
          m[i] = 0.9 * m[i] + 0.1 * g[i];
          v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
          const double mh = m[i] / (1 - std::pow(0.9, t + 1));
          const double vh = v[i] / (1 - std::pow(0.999, t + 1));
          ref[i] = static_cast<float>(ref[i] - 0.01 * mh / (std::sqrt(vh) + 1e-8));
        }
      }
    }
    EXPECT_EQ(x, y) << one->name();
    EXPECT_EQ(seen.size(), 4u);  // the runner really split the step
    if (k == 1) {
      for (int i = 0; i < n; ++i) ASSERT_NEAR(x[i], ref[i], 1e-5) << i;
    }
  }
}

// Every SGD variant against the update rule written out in float, bit for
// bit (the vectorised loops must round exactly as the rule does).
TEST(Sgd, EveryVariantFollowsTheUpdateRuleBitExactly) {
  struct Case {
    double momentum, weight_decay;
    bool nesterov;
  };
  const Case cases[] = {{0, 0, false},  {0, 0.01, false},   {0.9, 0, false},
                        {0.9, 0, true}, {0.5, 0.02, false}, {0.5, 0.02, true}};
  std::mt19937 gen(11);
  std::normal_distribution<float> normal;
  for (const Case& c : cases) {
    auto opt = *CreateSgd({.learning_rate = 0.05,
                           .momentum = c.momentum,
                           .weight_decay = c.weight_decay,
                           .nesterov = c.nesterov});
    const int n = 1003;  // not a multiple of any vector width
    std::vector<float> x(n), ref, v(n, 0.0f);
    for (float& e : x) e = normal(gen);
    ref = x;
    const float lr = 0.05f, mu = static_cast<float>(c.momentum);
    const float wd = static_cast<float>(c.weight_decay);
    for (int t = 0; t < 3; ++t) {
      std::vector<float> g(n);
      for (float& e : g) e = normal(gen);
      TANDEM_ASSERT_OK(opt->Step(absl::MakeSpan(x), g));
      for (int i = 0; i < n; ++i) {
        float gi = g[i];
        if (wd != 0.0f) gi += wd * ref[i];
        if (mu > 0.0f) {
          v[i] = t == 0 ? gi : mu * v[i] + gi;
          gi = c.nesterov ? gi + mu * v[i] : v[i];
        }
        ref[i] -= lr * gi;
      }
    }
    EXPECT_EQ(x, ref) << "momentum " << c.momentum << " wd " << c.weight_decay << " nesterov "
                      << c.nesterov;
  }
}

// A moment that decays towards zero is flushed to zero instead of passing
// through the denormal range (the update's results are otherwise unchanged).
TEST(Optimizers, AdamFlushesDenormalMoments) {
  auto adam = *CreateAdam({.learning_rate = 0.01});
  std::vector<float> x = {1.0f};
  TANDEM_ASSERT_OK(adam->Step(absl::MakeSpan(x), std::vector<float>{1e-30f}));
  for (int t = 0; t < 200; ++t) {
    TANDEM_ASSERT_OK(adam->Step(absl::MakeSpan(x), std::vector<float>{0.0f}));
    const Optimizer::State s = adam->SaveState();
    for (const auto& buf : s.buffers) {
      ASSERT_NE(std::fpclassify(buf[0]), FP_SUBNORMAL) << "step " << t;
    }
  }
  EXPECT_EQ(adam->SaveState().buffers[0][0], 0.0f);  // m = 1e-31 * 0.9^200 underflowed
  EXPECT_TRUE(std::isfinite(x[0]));
}

}  // namespace
}  // namespace tandem::ml
