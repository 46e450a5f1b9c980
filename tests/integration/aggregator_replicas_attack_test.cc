// Attacks on replicated aggregators (issue 24), real daemons over a real
// PostgreSQL server (aggregator_replicas_fixture.h): a coordinator that
// tries to spend more privacy budget than an operator allows by opening the
// next round through a replica that has not seen the last release.
#include "tests/integration/aggregator_replicas_fixture.h"

namespace tandem::replicas_testing {
namespace {

TEST_F(AggregatorReplicasTest, AnotherReplicaDoesNotResetThePrivacyBudget) {
  // z = 1 (noise_variance = sensitivity^2): one release fits a budget of 6
  // at delta 1e-5, two do not (the single-process case: adversarial_test).
  const std::string policy =
      "min_noise_multiplier: 1 min_batch_size: 1 require_norm_proofs: false epsilon_budget: 6";
  DaemonProcess* h1 = Start("helper", "h1", nullptr, policy);
  DaemonProcess* l1 = Start("leader", "l1", h1, policy);
  DaemonProcess* l2 = Start("leader", "l2", h1, policy);
  ASSERT_TRUE(h1 != nullptr && l1 != nullptr && l2 != nullptr);
  const Endpoint leader1 = Connect(l1), leader2 = Connect(l2), helper = Connect(h1);
  const double sensitivity = 16.0 * 65536.0;  // clip_l2_norm * 2^fractional_bits
  params_.set_noise_variance(sensitivity * sensitivity);
  TANDEM_ASSERT_OK(leader1.Open(params_));
  TANDEM_ASSERT_OK(helper.Open(params_));
  // l2 loads the task while round 1 is open: its accountant holds no
  // release yet, and no later call tells it about one.
  auto before = leader2.Status(params_.task_id());
  ASSERT_THAT(before, IsOk());
  EXPECT_EQ(before->released_rounds(), 0u);
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 3; ++seed) Upload(seed, leader1, helper, expected);
  ASSERT_TRUE(WaitFor([&] { return NonePending(leader1); }, absl::Seconds(30)));
  ASSERT_THAT(leader1.Finalize(params_.task_id(), 1), IsOk());
  ASSERT_THAT(helper.Finalize(params_.task_id(), 1), IsOk());
  // l2 did not take part in round 1's release: it reads the spent budget
  // from the database before opening a round and refuses round 2 like l1.
  params_.set_round_id(2);
  EXPECT_THAT(leader2.Open(params_), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(leader1.Open(params_), StatusIs(absl::StatusCode::kFailedPrecondition));
  auto s = leader2.Status(params_.task_id());
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->released_rounds(), 1u);
  EXPECT_GT(s->epsilon_spent(), 0);
}

}  // namespace
}  // namespace tandem::replicas_testing
