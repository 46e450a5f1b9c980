#include "crypto/dp/calibration.h"

#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::dp {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(MaxSteps, IsTheLargestStepCountWithinTarget) {
  const auto orders = DefaultOrders();
  TANDEM_ASSERT_OK_AND_ASSIGN(const int64_t t,
                              MaxSteps(0.01, 4.0, 1.26, 1e-5, orders, EpsilonConversion::kClassic));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const auto at, ComputeEpsilon(0.01, 4.0, t, 1e-5, orders, EpsilonConversion::kClassic));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const auto next, ComputeEpsilon(0.01, 4.0, t + 1, 1e-5, orders, EpsilonConversion::kClassic));
  EXPECT_LE(at.epsilon, 1.26);
  EXPECT_GT(next.epsilon, 1.26);
  EXPECT_NEAR(static_cast<double>(t), 10000, 300);  // Abadi et al.'s 10000 steps at 1.26.
  EXPECT_THAT(MaxSteps(1.0, 0.1, 0.5, 1e-5, orders, EpsilonConversion::kClassic),
              ::tandem::testing::IsOkAndHolds(0));
  EXPECT_THAT(MaxSteps(0.01, 4.0, 0, 1e-5, orders, EpsilonConversion::kClassic),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target")));
}

TEST(MinNoiseMultiplier, InvertsComputeEpsilon) {
  const auto orders = DefaultOrders();
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const double sigma,
      MinNoiseMultiplier(256.0 / 60000, 14063, 3.0, 1e-5, orders, EpsilonConversion::kClassic));
  EXPECT_NEAR(sigma, 1.1, 0.01);  // ~1.1 gives ~3.0 on MNIST (above).
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto at, ComputeEpsilon(256.0 / 60000, sigma, 14063, 1e-5,
                                                            orders, EpsilonConversion::kClassic));
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto below,
                              ComputeEpsilon(256.0 / 60000, sigma * (1 - 1e-4), 14063, 1e-5, orders,
                                             EpsilonConversion::kClassic));
  EXPECT_LE(at.epsilon, 3.0);
  EXPECT_GT(below.epsilon, 3.0);
  // log(1/delta)/(a-1) >= 0.02 at a = 512: no sigma reaches epsilon 1e-3.
  EXPECT_THAT(MinNoiseMultiplier(1.0, 1, 1e-3, 1e-5, orders, EpsilonConversion::kClassic),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no noise")));
  EXPECT_THAT(MinNoiseMultiplier(0.5, 0, 1, 1e-5, orders, EpsilonConversion::kClassic),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("steps")));
}

// Epsilon of a plan at noise multiplier `z`, through the ledger (an
// independent path: PrivacyAccountant::Charge line by line).
double LedgerEpsilon(absl::Span<const PlannedReleases> plan, double z) {
  AccountantOptions o;
  o.epsilon_budget = 1e12;
  o.delta = 1e-5;
  absl::StatusOr<PrivacyAccountant> acc = PrivacyAccountant::Create(o);
  EXPECT_TRUE(acc.ok());
  for (const PlannedReleases& r : plan) {
    EXPECT_TRUE(acc->Charge(r.q, r.sigma == 0 ? z : r.sigma, r.steps, r.blocks_per_group).ok());
  }
  return acc->SpentEpsilon();
}

double Calibrate(absl::Span<const PlannedReleases> plan, double target) {
  absl::StatusOr<double> z =
      MinNoiseMultiplier(plan, target, 1e-5, DefaultOrders(), EpsilonConversion::kImproved);
  EXPECT_TRUE(z.ok()) << z.status();
  return z.ok() ? *z : 0;
}

// The main job's training plan (q = 0.05, 20 rounds) with PREAMBLE's block
// sampling: the least noise lands on the target from below, and any less
// overspends; more blocks per group need less noise for the same epsilon.
TEST(MinNoiseMultiplier, BlockSampledPlanLandsOnTheTarget) {
  double previous = 0;
  for (int64_t m : {1, 2, 4, 8}) {
    const std::vector<PlannedReleases> plan = {{.q = 0.05, .steps = 20, .blocks_per_group = m}};
    const double z = Calibrate(plan, 2.0);
    EXPECT_LE(LedgerEpsilon(plan, z), 2.0) << m;
    EXPECT_GT(LedgerEpsilon(plan, z * (1 - 1e-4)), 2.0) << m;
    if (m > 1) {
      EXPECT_LT(z, previous) << m;
    }
    previous = z;
  }
}

// Training rounds and evaluation rounds (no block sampling) at the same
// calibrated noise, or the evaluation at a fixed noise: the composition is
// what is calibrated, not the training rounds alone.
TEST(MinNoiseMultiplier, ComposesEveryReleaseOfThePlan) {
  const std::vector<PlannedReleases> training = {{.q = 0.05, .steps = 20, .blocks_per_group = 2}};
  const std::vector<PlannedReleases> both = {{.q = 0.05, .steps = 20, .blocks_per_group = 2},
                                             {.q = 0.05, .steps = 4}};
  const double z_training = Calibrate(training, 2.0);
  const double z_both = Calibrate(both, 2.0);
  EXPECT_GT(z_both, z_training);
  EXPECT_LE(LedgerEpsilon(both, z_both), 2.0);
  EXPECT_GT(LedgerEpsilon(both, z_both * (1 - 1e-4)), 2.0);
  const std::vector<PlannedReleases> fixed_eval = {{.q = 0.05, .steps = 20, .blocks_per_group = 2},
                                                   {.q = 0.05, .steps = 4, .sigma = 3.0}};
  const double z = Calibrate(fixed_eval, 2.0);
  EXPECT_GT(z, z_training);
  EXPECT_LE(LedgerEpsilon(fixed_eval, z), 2.0);
  EXPECT_GT(LedgerEpsilon(fixed_eval, z * (1 - 1e-4)), 2.0);
}

TEST(MinNoiseMultiplier, RefusesPlansItCannotMeet) {
  const auto orders = DefaultOrders();
  const auto conv = EpsilonConversion::kImproved;
  EXPECT_THAT(MinNoiseMultiplier({}, 1, 1e-5, orders, conv),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  const std::vector<PlannedReleases> all_fixed = {{.q = 0.5, .steps = 3, .sigma = 1}};
  EXPECT_THAT(MinNoiseMultiplier(all_fixed, 1, 1e-5, orders, conv),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("calibrate")));
  // The fixed evaluation alone (q = 1, sigma 0.5, 10 rounds) is far above 1.
  const std::vector<PlannedReleases> over = {{.q = 0.05, .steps = 5},
                                             {.q = 1.0, .steps = 10, .sigma = 0.5}};
  EXPECT_THAT(MinNoiseMultiplier(over, 1, 1e-5, orders, conv),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("at fixed noise")));
  const std::vector<PlannedReleases> bad_blocks = {{.q = 0.05, .steps = 5, .blocks_per_group = 0}};
  EXPECT_THAT(MinNoiseMultiplier(bad_blocks, 1, 1e-5, orders, conv).status().code(),
              absl::StatusCode::kInvalidArgument);
  const std::vector<PlannedReleases> bad_sigma = {{.q = 0.05, .steps = 5},
                                                  {.q = 0.05, .steps = 5, .sigma = -1}};
  EXPECT_THAT(MinNoiseMultiplier(bad_sigma, 1, 1e-5, orders, conv),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("noise multiplier")));
  const std::vector<PlannedReleases> bad_q = {{.q = 1.5, .steps = 5}};
  EXPECT_THAT(MinNoiseMultiplier(bad_q, 1, 1e-5, orders, conv).status().code(),
              absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::dp
