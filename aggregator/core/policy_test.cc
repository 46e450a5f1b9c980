#include "aggregator/core/policy.h"

#include <cmath>
#include <limits>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

// A norm-bound round of D = 4 * 2^2 * 8 with noise multiplier `z` against
// the bound max_l2_squared = 2^20 (Delta = 1024).
proto::RoundParameters Round(double z, uint32_t min_batch = 10) {
  proto::RoundParameters p;
  p.set_task_id("t");
  p.set_round_id(1);
  p.set_dimension(4 * 4 * 8);
  p.mutable_group_parameters()->set_log_num_blocks(2);
  p.mutable_group_parameters()->set_block_size(8);
  p.mutable_group_parameters()->set_value_bits(64);
  p.set_num_groups(4);
  p.set_max_reports(100);
  p.mutable_dp()->set_min_batch_size(min_batch);
  p.mutable_norm_bound()->set_max_l2_squared(uint64_t{1} << 20);
  p.mutable_norm_bound()->set_max_block_l2_squared(uint64_t{1} << 20);
  p.mutable_fixed_point()->set_fractional_bits(10);
  p.mutable_fixed_point()->set_clip_l2_norm(1.0);
  const double sigma = z * 1024.0;
  p.set_noise_variance(sigma * sigma);
  return p;
}

TEST(PolicyTest, DefaultsAreThePrivateOnes) {
  absl::StatusOr<Policy> p = ResolvePolicy({}, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->min_noise_multiplier, 1.0);
  EXPECT_EQ(p->min_batch_size, 10u);
  EXPECT_EQ(p->epsilon_budget, 10.0);
  EXPECT_EQ(p->delta, 1e-5);
  EXPECT_EQ(p->sampling_rate, 1.0);
  EXPECT_TRUE(p->require_norm_proofs);
}

TEST(PolicyTest, TaskFieldsWinOverTheDefaultPolicy) {
  proto::PrivacyPolicy fallback, task;
  fallback.set_min_batch_size(20);
  fallback.set_epsilon_budget(4);
  task.set_epsilon_budget(2);
  absl::StatusOr<Policy> p = ResolvePolicy(task, fallback);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->min_batch_size, 20u);
  EXPECT_EQ(p->epsilon_budget, 2.0);
  EXPECT_EQ(p->min_noise_multiplier, 1.0);
}

TEST(PolicyTest, ExplicitZeroIsZeroNotTheDefault) {
  proto::PrivacyPolicy task;
  task.set_min_noise_multiplier(0);
  task.set_require_norm_proofs(false);
  absl::StatusOr<Policy> p = ResolvePolicy(task, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->min_noise_multiplier, 0.0);
  EXPECT_FALSE(p->require_norm_proofs);
}

TEST(PolicyTest, RefusesValuesOutOfRange) {
  auto bad = [](auto set) {
    proto::PrivacyPolicy p;
    set(p);
    return ResolvePolicy(p, {}).status();
  };
  EXPECT_THAT(bad([](auto& p) { p.set_min_noise_multiplier(-1); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](auto& p) { p.set_min_noise_multiplier(std::nan("")); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](auto& p) { p.set_min_batch_size(0); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](auto& p) { p.set_delta(1); }), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](auto& p) { p.set_sampling_rate(0); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](auto& p) { p.set_epsilon_budget(0); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(bad([](auto& p) {
                p.set_epsilon_budget(std::numeric_limits<double>::infinity());
              }).ok());
}

TEST(PolicyTest, PolicySetPerTaskAndDuplicates) {
  proto::AggregatorConfig config;
  config.mutable_default_policy()->set_min_batch_size(5);
  proto::TaskPolicy* t = config.add_task_policies();
  t->set_task_id("small");
  t->mutable_policy()->set_max_sent_values(1024);
  t->mutable_policy()->set_max_dimension(uint64_t{1} << 26);
  absl::StatusOr<PolicySet> set = PolicySet::FromConfig(config);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->For("small").max_sent_values, 1024u);
  EXPECT_EQ(set->For("small").min_batch_size, 5u);  // from the default policy
  EXPECT_EQ(set->For("other").max_sent_values, uint64_t{1} << 18);
  EXPECT_EQ(set->MaxDimension(), uint64_t{1} << 26);
  *config.add_task_policies() = *t;
  EXPECT_THAT(PolicySet::FromConfig(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two policies")));
}

TEST(PolicyTest, OnlyProvisionedTasksUnlessOpen) {
  proto::AggregatorConfig config;
  proto::TaskPolicy* a = config.add_task_policies();
  a->set_task_id("fmnist-train");
  a->set_population("phones");
  proto::TaskPolicy* b = config.add_task_policies();
  b->set_task_id("fmnist-eval");
  b->set_population("phones");
  config.add_task_policies()->set_task_id("solo");
  absl::StatusOr<PolicySet> set = PolicySet::FromConfig(config);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE(set->open());
  EXPECT_TRUE(set->Provisioned("fmnist-train"));
  EXPECT_TRUE(set->Provisioned("solo"));
  EXPECT_FALSE(set->Provisioned("fmnist-train2"));
  EXPECT_FALSE(set->Provisioned("default"));
  EXPECT_EQ(set->PopulationOf("fmnist-eval"), "phones");
  EXPECT_EQ(set->PopulationOf("solo"), "solo");  // a population of its own
  EXPECT_EQ(set->TasksOf("phones"), (std::vector<std::string>{"fmnist-eval", "fmnist-train"}));
  EXPECT_EQ(set->TasksOf("solo"), (std::vector<std::string>{"solo"}));

  config.set_allow_unprovisioned_tasks(true);
  set = PolicySet::FromConfig(config);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->Provisioned("anything"));
  EXPECT_EQ(set->PopulationOf("anything"), "anything");
  EXPECT_TRUE(PolicySet::Uniform(Policy{}).Provisioned("x"));
}

TEST(PolicyTest, PopulationNeedsOneDeltaAndAValidId) {
  proto::AggregatorConfig config;
  proto::TaskPolicy* a = config.add_task_policies();
  a->set_task_id("a");
  a->set_population("phones");
  proto::TaskPolicy* b = config.add_task_policies();
  b->set_task_id("b");
  b->set_population("phones");
  b->mutable_policy()->set_delta(1e-6);
  EXPECT_THAT(PolicySet::FromConfig(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("population 'phones'")));
  b->clear_policy();
  b->set_population("bad population");
  EXPECT_THAT(PolicySet::FromConfig(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("population")));
}

// Run-time provisioning (the operator API): a changed copy, validated like
// the config; a retired task opens nothing but stays in its population.
TEST(PolicyTest, WithAndRetiredAreValidatedCopies) {
  proto::AggregatorConfig config;
  config.mutable_default_policy()->set_epsilon_budget(4);
  proto::TaskPolicy* a = config.add_task_policies();
  a->set_task_id("a");
  a->set_population("phones");
  TANDEM_ASSERT_OK_AND_ASSIGN(const PolicySet set, PolicySet::FromConfig(config));
  proto::TaskPolicy b;
  b.set_task_id("b");
  b.set_population("phones");
  TANDEM_ASSERT_OK_AND_ASSIGN(const PolicySet with_b, set.With(b, config.default_policy()));
  EXPECT_FALSE(set.Provisioned("b"));  // the original is unchanged
  EXPECT_TRUE(with_b.Provisioned("b"));
  EXPECT_EQ(with_b.For("b").epsilon_budget, 4);  // the default policy's
  EXPECT_EQ(with_b.TasksOf("phones"), (std::vector<std::string>{"a", "b"}));
  EXPECT_THAT(with_b.With(b, config.default_policy()).status(),
              StatusIs(absl::StatusCode::kAlreadyExists));
  // Holds: exactly these terms (the resolved policy and the population).
  EXPECT_TRUE(with_b.Holds(b, config.default_policy()));
  EXPECT_FALSE(set.Holds(b, config.default_policy()));
  proto::TaskPolicy other = b;
  other.set_population("tablets");
  EXPECT_FALSE(with_b.Holds(other, config.default_policy()));
  other = b;
  other.mutable_policy()->set_epsilon_budget(5);
  EXPECT_FALSE(with_b.Holds(other, config.default_policy()));
  other.mutable_policy()->set_epsilon_budget(4);  // the default's, stated
  EXPECT_TRUE(with_b.Holds(other, config.default_policy()));
  proto::TaskPolicy c = b;
  c.set_task_id("c");
  c.mutable_policy()->set_delta(1e-7);
  EXPECT_THAT(
      with_b.With(c, config.default_policy()).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one ledger needs one delta")));
  c.set_task_id("c d");
  EXPECT_THAT(with_b.With(c, config.default_policy()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));

  TANDEM_ASSERT_OK_AND_ASSIGN(const PolicySet retired, with_b.Retired("b"));
  EXPECT_FALSE(retired.Provisioned("b"));
  EXPECT_TRUE(retired.retired("b"));
  EXPECT_EQ(retired.TasksOf("phones"), (std::vector<std::string>{"a", "b"}));  // still charged
  EXPECT_THAT(retired.With(b, config.default_policy()).status(),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("retired")));
  EXPECT_THAT(retired.Retired("zzz").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(retired.Tasks(), (std::vector<std::string>{"a", "b"}));
}

TEST(PolicyTest, NoiseMultiplierIsSigmaOverTheProvedBound) {
  absl::StatusOr<double> z = NoiseMultiplierOf(Round(1.25));
  ASSERT_TRUE(z.ok());
  EXPECT_DOUBLE_EQ(*z, 1.25);
  proto::RoundParameters clear = Round(0.5);
  clear.clear_norm_bound();  // then the announced clip: 1.0 * 2^10 = 1024
  EXPECT_DOUBLE_EQ(*NoiseMultiplierOf(clear), 0.5);
  EXPECT_EQ(*NoiseMultiplierOf(Round(0)), 0.0);
  clear.mutable_fixed_point()->set_clip_l2_norm(0);
  EXPECT_THAT(NoiseMultiplierOf(clear).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PolicyTest, RoundChecksNameTheRule) {
  const Policy policy;  // the defaults
  EXPECT_TRUE(CheckRoundAgainstPolicy(Round(1.0), policy).ok());
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(0), policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("below this server's floor")));
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(0.99), policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("floor")));
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(1.0, /*min_batch=*/1), policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_batch_size")));
  proto::RoundParameters no_proofs = Round(1.0);
  no_proofs.clear_norm_bound();
  EXPECT_THAT(CheckRoundAgainstPolicy(no_proofs, policy),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("norm proofs")));
  Policy small = policy;
  small.max_sent_values = 16;  // the round sends 4 * 8 = 32
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(1.0), small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("values")));
  small = policy;
  small.max_dimension = 64;
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(1.0), small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension")));
  small = policy;
  small.max_reports_per_round = 50;
  EXPECT_THAT(CheckRoundAgainstPolicy(Round(1.0), small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_reports")));
}

}  // namespace
}  // namespace tandem::aggregator
