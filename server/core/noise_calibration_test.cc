#include "server/core/noise_calibration.h"

#include <vector>

#include "base/testing/status_matchers.h"
#include "crypto/dp/calibration.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;

constexpr int64_t kDim = 4096;

// A PREAMBLE task over one tensor of kDim values: B = 64, d as given,
// random blocks, q = 0.05, delta 1e-5.
FederatedTaskOptions Task(uint32_t log_blocks_per_group) {
  FederatedTaskOptions o;
  o.secure_sum.task_id = "t";
  o.secure_sum.block_size = 64;
  o.secure_sum.log_blocks_per_group = log_blocks_per_group;
  o.secure_sum.clip_l2_norm = 2;
  o.secure_sum.max_reports = 200;
  o.secure_sum.encoding = EncodingChoice::kPreamble;
  o.secure_sum.noise_multiplier = 1.0;  // replaced
  o.sample_rate = 0.05;
  o.delta = 1e-5;
  return o;
}

double PlainZ(int64_t rounds, double target) {
  absl::StatusOr<double> z = dp::MinNoiseMultiplier(0.05, rounds, target, 1e-5, dp::DefaultOrders(),
                                                    dp::EpsilonConversion::kImproved);
  EXPECT_TRUE(z.ok()) << z.status();
  return z.ok() ? *z : 0;
}

// Runs the task's rounds until the ledger refuses one; returns how many
// were released and the epsilon after the last.
std::pair<int, double> RunToBudget(const FederatedTaskOptions& o) {
  absl::StatusOr<std::unique_ptr<FederatedTask>> task =
      FederatedTask::Create(o, {{"w", 0, kDim, true}}, std::vector<float>(kDim, 0.f));
  EXPECT_TRUE(task.ok()) << task.status();
  int rounds = 0;
  double epsilon = 0;
  while (rounds < 1000) {
    absl::StatusOr<RoundPlan> plan = (*task)->PlanRound();
    if (!plan.ok()) {
      EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kResourceExhausted));
      break;
    }
    ++rounds;
    epsilon = plan->epsilon_after;
    EXPECT_TRUE((*task)->FinishRound(std::vector<float>(kDim, 0.f)).ok());
  }
  return {rounds, epsilon};
}

// The calibrated task runs exactly its planned rounds within the target
// (the budget defaults to it and stops the next), landing on it from below;
// block sampling buys less noise for the same epsilon, more with larger d.
TEST(ApplyNoiseTarget, PlannedRoundsLandOnTheTargetWithLessNoiseUnderBlockSampling) {
  double previous = 0;
  for (uint32_t d : {0u, 1u, 2u}) {
    FederatedTaskOptions o = Task(d);
    const NoiseTarget target{.target_epsilon = 2.0, .rounds = 20};
    ASSERT_TRUE(ApplyNoiseTarget(target, kDim, &o).ok()) << d;
    EXPECT_EQ(o.epsilon_budget, 2.0);
    const double z = o.secure_sum.noise_multiplier;
    if (d == 0) {
      EXPECT_DOUBLE_EQ(z, PlainZ(20, 2.0));
    } else {
      EXPECT_LT(z, previous) << d;
    }
    previous = z;
    const auto [rounds, epsilon] = RunToBudget(o);
    EXPECT_EQ(rounds, 20) << d;
    EXPECT_LE(epsilon, 2.0) << d;
    EXPECT_GT(epsilon, 2.0 - 1e-3) << d;
    // Any less noise and the 20th round would overspend.
    o.secure_sum.noise_multiplier = z * (1 - 1e-4);
    EXPECT_EQ(RunToBudget(o).first, 19) << d;
  }
}

// No block sampling is credited where the rounds do not sample blocks at
// random: dense rounds, TOP_NORM, and FedLUAR under `auto` (the packed
// size, and so the encoding, changes from round to round).
TEST(ApplyNoiseTarget, CreditsBlockSamplingOnlyWhereRoundsSampleBlocks) {
  const NoiseTarget target{.target_epsilon = 2.0, .rounds = 20};
  const double plain = PlainZ(20, 2.0);
  FederatedTaskOptions dense = Task(1);
  dense.secure_sum.encoding = EncodingChoice::kDense;
  FederatedTaskOptions top = Task(1);
  top.secure_sum.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  // With norm proofs `auto` keeps PREAMBLE here (the witness doubles a
  // dense report): credited without FedLUAR, not with it.
  FederatedTaskOptions automatic = Task(1);
  automatic.secure_sum.encoding = EncodingChoice::kAuto;
  automatic.secure_sum.norm_proofs = true;
  ASSERT_TRUE(ApplyNoiseTarget(target, kDim, &automatic).ok());
  EXPECT_LT(automatic.secure_sum.noise_multiplier, plain);
  FederatedTaskOptions luar = Task(1);
  luar.secure_sum.encoding = EncodingChoice::kAuto;
  luar.secure_sum.norm_proofs = true;
  luar.num_recycled = 1;
  for (FederatedTaskOptions* o : {&dense, &top, &luar}) {
    ASSERT_TRUE(ApplyNoiseTarget(target, kDim, o).ok());
    EXPECT_DOUBLE_EQ(o->secure_sum.noise_multiplier, plain);
  }
}

// Evaluation rounds are releases too: at the calibrated noise or at their
// own, they take their share of the target.
TEST(ApplyNoiseTarget, PlansTheEvaluationRounds) {
  FederatedTaskOptions training = Task(1);
  ASSERT_TRUE(ApplyNoiseTarget({.target_epsilon = 2.0, .rounds = 20}, kDim, &training).ok());
  FederatedTaskOptions both = Task(1);
  ASSERT_TRUE(
      ApplyNoiseTarget({.target_epsilon = 2.0, .rounds = 20, .evaluations = 4}, kDim, &both).ok());
  FederatedTaskOptions fixed = Task(1);
  ASSERT_TRUE(ApplyNoiseTarget({.target_epsilon = 2.0,
                                .rounds = 20,
                                .evaluations = 4,
                                .evaluation_noise_multiplier = 3.0},
                               kDim, &fixed)
                  .ok());
  EXPECT_GT(both.secure_sum.noise_multiplier, training.secure_sum.noise_multiplier);
  EXPECT_GT(fixed.secure_sum.noise_multiplier, training.secure_sum.noise_multiplier);
  // The training rounds alone now stop short of the target.
  both.epsilon_budget = 0;
  EXPECT_EQ(RunToBudget(both).first, 1000);
}

TEST(ApplyNoiseTarget, RefusesWhatCannotBeMet) {
  FederatedTaskOptions o = Task(1);
  EXPECT_THAT(ApplyNoiseTarget({.target_epsilon = 0, .rounds = 20}, kDim, &o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ApplyNoiseTarget({.target_epsilon = 2, .rounds = 0}, kDim, &o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ApplyNoiseTarget(
          {.target_epsilon = 2, .rounds = 20, .evaluations = 2, .evaluation_noise_multiplier = 0},
          kDim, &o),
      StatusIs(absl::StatusCode::kInvalidArgument));
  o.epsilon_budget = 3;
  EXPECT_THAT(ApplyNoiseTarget({.target_epsilon = 2, .rounds = 20}, kDim, &o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A smaller budget is kept (it stops the task earlier).
  o.epsilon_budget = 1;
  ASSERT_TRUE(ApplyNoiseTarget({.target_epsilon = 2, .rounds = 20}, kDim, &o).ok());
  EXPECT_EQ(o.epsilon_budget, 1);
  // Evaluations at fixed noise that alone spend more than the target.
  FederatedTaskOptions p = Task(1);
  p.sample_rate = 1.0;
  EXPECT_THAT(
      ApplyNoiseTarget(
          {.target_epsilon = 1, .rounds = 2, .evaluations = 10, .evaluation_noise_multiplier = 0.3},
          kDim, &p),
      StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(p.secure_sum.noise_multiplier, 1.0);  // untouched on error
}

}  // namespace
}  // namespace tandem::server
