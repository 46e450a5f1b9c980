// Issue 33 item 2, attacked with real daemons: a coordinator (holding the
// coordinator's certificate and ticket key) cannot make either aggregator
// process a task its operator did not provision, nor restart a
// population's privacy spending under a second task id, nor have two tasks
// of one population both take its last budget; the ledger survives a
// SIGKILL of both daemons.
#include <filesystem>
#include <limits>
#include <string>

#include "crypto/dp/accountant.h"
#include "tests/integration/aggregator_pair_fixture.h"

namespace tandem::integration {
namespace {

using TaskProvisioningTest = AggregatorPairTest;

proto::RoundParameters ForTask(const proto::RoundParameters& p, const std::string& task,
                               uint64_t round = 1) {
  proto::RoundParameters out = p;
  out.set_task_id(task);
  out.set_round_id(round);
  return out;
}

// Whether any state file under `dir` names `task` (the store of a task is
// created by its first OpenRound).
bool AnyFileNames(const std::string& dir, const std::string& task) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find(task) != std::string::npos) return true;
  }
  return false;
}

TEST_F(TaskProvisioningTest, AnUnprovisionedTaskIsRefusedByBothAggregators) {
  const proto::RoundParameters rogue = ForTask(params_, "rogue-task");
  EXPECT_THAT(Open(rogue, false), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Open(rogue, true), StatusIs(absl::StatusCode::kFailedPrecondition));
  // Nothing was created for it: no status, no store, and an upload under a
  // ticket the coordinator's own key signed finds no round.
  EXPECT_THAT(Status(false, "rogue-task").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Status(true, "rogue-task").status(), StatusIs(absl::StatusCode::kNotFound));
  TestReport r = Honest(1, &rogue);
  EXPECT_THAT(Upload(r.to_leader, false), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Upload(r.to_helper, true), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_FALSE(AnyFileNames(dir_ + "/state", "rogue-task"));

  // A provisioned task opens; each server counted the refusal.
  TANDEM_ASSERT_OK(OpenBoth(ForTask(params_, "adv-solo")));
  for (bool helper : {false, true}) {
    auto s = Status(helper, "adv-solo");
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->refused_calls().at("collector/unprovisioned"), 1u) << helper;
    EXPECT_EQ(s->population(), "adv-solo");  // a population of its own
  }
}

TEST_F(TaskProvisioningTest, ASecondTaskCannotRestartASpentPopulation) {
  // adv-task (population "phones") releases one round at z = 1, q = 1.
  TANDEM_ASSERT_OK(OpenBoth(params_));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    TestReport r = Honest(seed);
    TANDEM_ASSERT_OK(Upload(r.to_leader, false));
    TANDEM_ASSERT_OK(Upload(r.to_helper, true));
  }
  ASSERT_THAT(Finalize(false), IsOk());
  ASSERT_THAT(Finalize(true), IsOk());
  auto one = dp::PrivacyAccountant::Create(
      {dp::DefaultOrders(), 1e-5, std::numeric_limits<double>::max()});
  ASSERT_THAT(one, IsOk());
  TANDEM_ASSERT_OK(one->Charge(1.0, 1.0));
  for (bool helper : {false, true}) {
    auto s = Status(helper);
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->population(), "phones");
    EXPECT_DOUBLE_EQ(s->population_epsilon_spent(), one->SpentEpsilon());
  }

  // adv-eval spends the same phones' privacy: a second release (~7.1 > 6)
  // is refused by both, whatever its task id; a task of another
  // population is not affected.
  const proto::RoundParameters eval = ForTask(params_, "adv-eval");
  for (bool helper : {false, true}) {
    absl::Status s = Open(eval, helper);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition)) << helper;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("population 'phones'"));
  }
  TANDEM_ASSERT_OK(OpenBoth(ForTask(params_, "adv-solo")));

  // The ledger is the stores' released rounds: it survives SIGKILL.
  KillPair();
  TANDEM_ASSERT_OK(StartPair());
  EXPECT_THAT(Open(eval, false), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Open(eval, true), StatusIs(absl::StatusCode::kFailedPrecondition));
  auto s = Status(true);
  ASSERT_THAT(s, IsOk());
  EXPECT_DOUBLE_EQ(s->population_epsilon_spent(), one->SpentEpsilon());
}

TEST_F(TaskProvisioningTest, TwoTasksOfAPopulationCannotBothHoldItsLastBudget) {
  // A round held open may still be released: it is charged in advance, so
  // adv-eval cannot open beside it (two releases would exceed the budget).
  TANDEM_ASSERT_OK(OpenBoth(params_));
  const proto::RoundParameters eval = ForTask(params_, "adv-eval");
  EXPECT_THAT(Open(eval, false), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Open(eval, true), StatusIs(absl::StatusCode::kFailedPrecondition));
  // adv-task moving on to round 2 abandons round 1 (never released): still
  // one round held for the population.
  TANDEM_ASSERT_OK(OpenBoth(ForTask(params_, params_.task_id(), 2)));
  EXPECT_THAT(Open(eval, false), StatusIs(absl::StatusCode::kFailedPrecondition));
  // After a restart the open round is held again, from the store.
  KillPair();
  TANDEM_ASSERT_OK(StartPair());
  EXPECT_THAT(Open(eval, true), StatusIs(absl::StatusCode::kFailedPrecondition));
  for (bool helper : {false, true}) {
    auto s = Status(helper);
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->open_round(), 2u);
    EXPECT_EQ(s->population_epsilon_spent(), 0.0);  // nothing released
  }
}

}  // namespace
}  // namespace tandem::integration
