#include "server/core/federated_task.h"

#include <vector>

#include "base/testing/status_matchers.h"
#include "crypto/dp/accountant.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

// Two weight matrices and a bias: [w1: 0..8) [b1: 8..10) [w2: 10..16).
std::vector<ml::TensorSlice> Slices() {
  return {{"w1", 0, 8, true}, {"b1", 8, 2, false}, {"w2", 10, 6, true}};
}

FederatedTaskOptions Options() {
  FederatedTaskOptions o;
  o.secure_sum.task_id = "t";
  o.secure_sum.block_size = 4;
  o.secure_sum.log_blocks_per_group = 1;
  o.secure_sum.clip_l2_norm = 10;
  o.secure_sum.max_reports = 100;
  return o;
}

TEST(FederatedTask, FedAvgAddsTheMeanUpdate) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto task,
                              FederatedTask::Create(Options(), Slices(), std::vector<float>(16, 1.f)));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundPlan plan, task->PlanRound());
  EXPECT_EQ(plan.round_id, 1u);
  EXPECT_EQ(plan.packed_size, 16);
  ASSERT_TRUE(plan.sum.has_value());
  EXPECT_GE(plan.sum->padded_dimension(), 16u);
  std::vector<float> mean(16);
  for (int i = 0; i < 16; ++i) mean[i] = 0.1f * i;
  TANDEM_ASSERT_OK(task->FinishRound(mean));
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(task->params()[i], 1.f + 0.1f * i) << i;
  EXPECT_EQ(task->completed_rounds(), 1u);
  EXPECT_EQ(task->epsilon_spent(), 0.0);
}

TEST(FederatedTask, FedLuarRecyclesOneWeightTensorAndReusesItsLastUpdate) {
  FederatedTaskOptions o = Options();
  o.num_recycled = 1;
  o.seed = 7;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto task,
                              FederatedTask::Create(o, Slices(), std::vector<float>(16, 1.f)));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundPlan first, task->PlanRound());
  EXPECT_TRUE(first.recycled.empty());  // round 1 aggregates everything
  std::vector<float> u1(16, 0.5f);
  TANDEM_ASSERT_OK(task->FinishRound(u1));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundPlan second, task->PlanRound());
  ASSERT_EQ(second.recycled.size(), 1u);
  const size_t r = second.recycled[0];
  EXPECT_TRUE(Slices()[r].recyclable);  // never the bias
  const int64_t recycled_size = Slices()[r].size;
  EXPECT_EQ(second.packed_size, 16 - recycled_size);
  std::vector<float> full(16, 0.25f);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<float> packed, task->PackUpdate(full));
  EXPECT_EQ(static_cast<int64_t>(packed.size()), second.packed_size);
  const std::vector<float> before(task->params().begin(), task->params().end());
  TANDEM_ASSERT_OK(task->FinishRound(packed));
  for (int64_t i = 0; i < 16; ++i) {
    const bool in_recycled = i >= Slices()[r].offset && i < Slices()[r].offset + recycled_size;
    // Recycled coordinates get the last received update (0.5), the rest 0.25.
    EXPECT_FLOAT_EQ(task->params()[i] - before[i], in_recycled ? 0.5f : 0.25f) << i;
  }
}

// A checkpoint restored into a fresh task (what a coordinator restart does)
// continues exactly like the original: params, FedAdam moments, FedLUAR's
// recycled set and stored updates, the privacy ledger.
TEST(FederatedTask, CheckpointRestoresEverythingARoundDependsOn) {
  FederatedTaskOptions o = Options();
  o.optimizer = ServerOptimizer::kFedAdam;
  o.server_lr = 0.1;
  o.num_recycled = 1;
  o.seed = 3;
  o.secure_sum.noise_multiplier = 1.0;
  o.sample_rate = 0.1;
  auto step = [](FederatedTask& t, float scale) -> absl::Status {
    absl::StatusOr<RoundPlan> plan = t.PlanRound();
    if (!plan.ok()) return plan.status();
    std::vector<float> full(16);
    for (int i = 0; i < 16; ++i) full[i] = scale * (i % 5 - 2);
    absl::StatusOr<std::vector<float>> packed = t.PackUpdate(full);
    if (!packed.ok()) return packed.status();
    return t.FinishRound(*packed);
  };
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, FederatedTask::Create(o, Slices(), std::vector<float>(16, 1.f)));
  TANDEM_ASSERT_OK(step(*a, 0.3f));
  TANDEM_ASSERT_OK(step(*a, -0.2f));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::TaskCheckpoint cp, a->Checkpoint());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, FederatedTask::Create(o, Slices(), std::vector<float>(16, 1.f)));
  TANDEM_ASSERT_OK(b->Restore(cp));
  EXPECT_EQ(b->completed_rounds(), 2u);
  EXPECT_EQ(b->epsilon_spent(), a->epsilon_spent());
  for (float scale : {0.1f, 0.4f, -0.3f}) {
    TANDEM_ASSERT_OK(step(*a, scale));
    TANDEM_ASSERT_OK(step(*b, scale));
    ASSERT_EQ(std::vector<float>(a->params().begin(), a->params().end()),
              std::vector<float>(b->params().begin(), b->params().end()));
    EXPECT_EQ(a->fedluar().recycled(), b->fedluar().recycled());
    EXPECT_EQ(a->epsilon_spent(), b->epsilon_spent());
  }
  // A checkpoint of another model or without DP is refused, and changes nothing.
  proto::TaskCheckpoint short_params = cp;
  short_params.mutable_params()->RemoveLast();
  EXPECT_THAT(b->Restore(short_params), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::TaskCheckpoint no_dp = cp;
  no_dp.clear_accountant();
  EXPECT_THAT(b->Restore(no_dp), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::TaskCheckpoint bad_opt = cp;
  bad_opt.mutable_optimizer_buffers(0)->mutable_values()->RemoveLast();
  const std::vector<float> before(b->params().begin(), b->params().end());
  EXPECT_THAT(b->Restore(bad_opt), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::vector<float>(b->params().begin(), b->params().end()), before);
  TANDEM_ASSERT_OK(step(*b, 0.2f));  // still usable
  // No checkpoint while a round is planned.
  TANDEM_ASSERT_OK(b->PlanRound().status());
  EXPECT_THAT(b->Checkpoint().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Rounds are charged until the next would overspend. With PREAMBLE's
// random block selection (d = 1: one of 2 blocks per group) the ledger
// credits the block sampling (crypto/dp/block_sampling.h), so the same
// budget lasts more rounds than with TOP_NORM's data-dependent blocks,
// which are charged as the plain subsampled Gaussian.
TEST(FederatedTask, BudgetIsChargedBeforeReleaseAndRefusesOverspending) {
  const std::vector<double> orders = dp::DefaultOrders();
  auto epsilon = [&](int64_t blocks, int rounds) -> double {
    absl::StatusOr<std::vector<double>> rdp = dp::ComputeRdp(0.05, 2.0, rounds, orders, blocks);
    EXPECT_TRUE(rdp.ok());
    absl::StatusOr<dp::PrivacySpent> s =
        dp::EpsilonFromRdp(orders, *rdp, 1e-5, dp::EpsilonConversion::kImproved);
    EXPECT_TRUE(s.ok());
    return s->epsilon;
  };
  int rounds_of[2] = {0, 0};
  for (int random = 0; random < 2; ++random) {
    FederatedTaskOptions o = Options();
    o.secure_sum.noise_multiplier = 2.0;
    o.secure_sum.block_selection =
        random == 1 ? proto::BLOCK_SELECTION_RANDOM : proto::BLOCK_SELECTION_TOP_NORM;
    o.sample_rate = 0.05;
    o.delta = 1e-5;
    o.epsilon_budget = 1.5;
    TANDEM_ASSERT_OK_AND_ASSIGN(auto task,
                                FederatedTask::Create(o, Slices(), std::vector<float>(16, 0.f)));
    int rounds = 0;
    while (true) {
      absl::StatusOr<RoundPlan> plan = task->PlanRound();
      if (!plan.ok()) {
        EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kResourceExhausted));
        break;
      }
      ++rounds;
      EXPECT_LE(plan->epsilon_after, 1.5);
      TANDEM_ASSERT_OK(task->FinishRound(std::vector<float>(16, 0.f)));
      ASSERT_LT(rounds, 1000);
    }
    EXPECT_GT(rounds, 1);
    // The ledger agrees with the accountant library on the same rounds.
    const int64_t blocks = random == 1 ? 2 : 1;
    EXPECT_NEAR(task->epsilon_spent(), epsilon(blocks, rounds), 1e-9);
    EXPECT_GT(epsilon(blocks, rounds + 1), 1.5);
    rounds_of[random] = rounds;
  }
  EXPECT_GT(rounds_of[1], rounds_of[0]);
}

TEST(FederatedTask, FedAdamMovesAlongTheUpdate) {
  FederatedTaskOptions o = Options();
  o.optimizer = ServerOptimizer::kFedAdam;
  o.server_lr = 0.01;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto task,
                              FederatedTask::Create(o, Slices(), std::vector<float>(16, 0.f)));
  TANDEM_ASSERT_OK(task->PlanRound().status());
  std::vector<float> mean(16, 0.f);
  mean[3] = 1.f;
  mean[5] = -1.f;
  TANDEM_ASSERT_OK(task->FinishRound(mean));
  EXPECT_GT(task->params()[3], 0.f);
  EXPECT_LT(task->params()[5], 0.f);
  EXPECT_EQ(task->params()[0], 0.f);
}

TEST(FederatedTask, RejectsMisuse) {
  FederatedTaskOptions bad = Options();
  bad.sample_rate = 0;
  EXPECT_THAT(FederatedTask::Create(bad, Slices(), std::vector<float>(16)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = Options();
  bad.epsilon_budget = 1;  // a budget without noise
  EXPECT_THAT(FederatedTask::Create(bad, Slices(), std::vector<float>(16)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FederatedTask::Create(Options(), Slices(), std::vector<float>(15)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto task,
                              FederatedTask::Create(Options(), Slices(), std::vector<float>(16)));
  EXPECT_THAT(task->FinishRound(std::vector<float>(16)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  TANDEM_ASSERT_OK(task->PlanRound().status());
  EXPECT_THAT(task->PlanRound(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(task->FinishRound(std::vector<float>(3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::server
