#include "server/core/federated_evaluation.h"

#include <cmath>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

SecureSumConfig Training() {
  SecureSumConfig c;
  c.task_id = "digits";
  c.model_dimension = 2410;
  c.block_size = 64;
  c.log_blocks_per_group = 2;
  c.clip_l2_norm = 4;
  c.noise_multiplier = 1;
  c.norm_proofs = true;
  c.min_batch_size = 10;
  c.max_reports = 500;
  return c;
}

TEST(FederatedEvaluationTest, TheRoundSendsEveryMetricWithClipSqrt5) {
  auto sum = EvaluationSum(Training(), 10, 0.5);
  ASSERT_THAT(sum, IsOk());
  const proto::RoundParameters p = sum->RoundParameters(7);
  EXPECT_EQ(MetricsDimension(10), 23u);
  EXPECT_EQ(p.dimension(), 23u);  // one group, one block: nothing sparsified
  EXPECT_EQ(p.group_parameters().log_num_blocks(), 0u);
  EXPECT_EQ(p.task_id(), "digits");
  EXPECT_DOUBLE_EQ(p.fixed_point().clip_l2_norm(), std::sqrt(5.0));
  EXPECT_TRUE(p.has_norm_bound());  // the training rounds' proofs
  EXPECT_EQ(p.dp().min_batch_size(), 10u);
  // Each server reads back exactly z = 0.5 (aggregator/core/policy.h).
  const double delta = std::sqrt(static_cast<double>(p.norm_bound().max_l2_squared()));
  EXPECT_NEAR(std::sqrt(p.noise_variance()) / delta, 0.5, 1e-9);
}

TEST(FederatedEvaluationTest, DecodesInExamplesWithTheNoisesStandardDeviation) {
  FederatedEvaluationOptions o;
  o.every = 1;
  o.max_examples = 50;
  o.loss_clip = 4;
  const proto::EvaluationConfig config = EvaluationConfigOf(o, 2);
  auto sum = EvaluationSum(Training(), 2, 1.0);
  ASSERT_THAT(sum, IsOk());
  const proto::RoundParameters p = sum->RoundParameters(1);
  DecodedAggregate a;
  a.reports = 3;
  // 3 clients, 120 examples, 90 correct, loss sum 60 nats; class 0: 70
  // examples, 50 correct; class 1: 50 and 40.
  a.sum = {120 / 50.0f, 90 / 50.0f, 60 / 200.0f, 70 / 50.0f, 50 / 50.0f, 50 / 50.0f, 40 / 50.0f};
  auto e = DecodeEvaluation(a, p, config, 4);
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(e->model_version(), 4u);
  EXPECT_EQ(e->reports(), 3u);
  EXPECT_NEAR(e->examples(), 120, 1e-4);
  EXPECT_NEAR(e->correct(), 90, 1e-4);
  EXPECT_NEAR(e->loss_sum(), 60, 1e-4);
  EXPECT_NEAR(e->class_examples(0), 70, 1e-4);
  EXPECT_NEAR(e->class_correct(1), 40, 1e-4);
  EXPECT_NEAR(e->accuracy(), 0.75, 1e-6);
  EXPECT_NEAR(e->loss(), 0.5, 1e-6);
  // sqrt(2) servers x z = 1 x the proved bound (~sqrt(5)) x m examples.
  EXPECT_NEAR(e->count_stddev(), std::sqrt(2.0) * std::sqrt(5.0) * 50, 0.01 * 50);
  EXPECT_NEAR(e->loss_stddev(), e->count_stddev() * 4, 1e-9);

  a.sum.pop_back();
  EXPECT_THAT(DecodeEvaluation(a, p, config, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FederatedEvaluationTest, OptionsAreValidated) {
  FederatedEvaluationOptions o;
  EXPECT_THAT(ValidateEvaluationOptions(o, 10), IsOk());  // off
  o.every = 2;
  EXPECT_THAT(ValidateEvaluationOptions(o, 10), IsOk());
  o.max_examples = 0;
  EXPECT_THAT(ValidateEvaluationOptions(o, 10), StatusIs(absl::StatusCode::kInvalidArgument));
  o.max_examples = 10;
  o.loss_clip = 0;
  EXPECT_THAT(ValidateEvaluationOptions(o, 10), StatusIs(absl::StatusCode::kInvalidArgument));
  o.loss_clip = 1;
  EXPECT_THAT(ValidateEvaluationOptions(o, 1), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::server
