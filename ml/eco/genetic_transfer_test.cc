#include "ml/eco/genetic_transfer.h"

#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::eco {
namespace {

using ::tandem::testing::StatusIs;

// The real sklearn digits (deploy/install-deps.sh installs python3-sklearn).
EcoTasks Tasks() {
  auto split = LoadNamedDataset("digits", 7);
  EXPECT_TRUE(split.ok()) << split.status();
  auto t = MakeDigitsTasks(split->first, split->second, 30, 10);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

TEST(GeneticTransfer, TasksAreDisjointFiveWaySplits) {
  const EcoTasks t = Tasks();
  EXPECT_EQ(t.critic_train.size(), 150);
  EXPECT_EQ(t.descendant_train.size(), 50);
  EXPECT_GT(t.evolution_train.size(), 600);
  for (const Dataset* d : {&t.evolution_train, &t.critic_train, &t.descendant_test}) {
    EXPECT_EQ(d->num_classes, 5);
    for (int l : d->labels) EXPECT_TRUE(l >= 0 && l < 5);
  }
  // Critic and descendant test rows are interleaved halves of one test set.
  EXPECT_NEAR(static_cast<double>(t.critic_test.size()), t.descendant_test.size(), 5);
  EXPECT_THAT(MakeDigitsTasks(t.critic_train, t.critic_test, 3, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GeneticTransfer, SingleIndividualWithoutMutationKeepsItsCircuit) {
  EcoOptions o;
  o.population = 1;
  o.generations = 3;
  o.tournament = 1;
  o.mutation_rate = 0;
  o.evolution_epochs = 1;
  o.critic_epochs = 1;
  o.cnn = {8, 12, 16};
  const EcoTasks t = Tasks();
  EcoOptions first = o;
  first.generations = 1;
  TANDEM_ASSERT_OK_AND_ASSIGN(EcoResult one, EvolveLearngene(t, first));
  TANDEM_ASSERT_OK_AND_ASSIGN(EcoResult three, EvolveLearngene(t, o));
  EXPECT_EQ(three.best.masks, one.best.masks);  // inherited bit-exactly
  EXPECT_EQ(three.best.evaluations, 3);
  EXPECT_EQ(three.best_score_per_generation.size(), 3u);
}

// The experiment of the issue: learngene-initialised descendants learn the
// held-out classes faster than random init (same seeds, same batches).
TEST(GeneticTransfer, LearngeneInitialisationTrainsFasterThanRandom) {
  EcoOptions o;
  o.population = 4;
  o.generations = 2;
  o.seed = 11;
  const EcoTasks t = Tasks();
  TANDEM_ASSERT_OK_AND_ASSIGN(EcoResult r, EvolveLearngene(t, o));
  EXPECT_GT(r.learngene_fraction, 0.1);
  EXPECT_LT(r.learngene_fraction, 0.35);
  TANDEM_ASSERT_OK_AND_ASSIGN(TransferCurve c, CompareInitialisations(t, r.best, o, 5, 4));
  // Epoch 1 is two SGD steps on 50 rows (both near chance); from epoch 2 on
  // the inherited circuit is ahead, by > 5 points on average.
  double gain = 0;
  for (size_t e = 1; e < c.random_accuracy.size(); ++e) {
    SCOPED_TRACE(e);
    EXPECT_GT(c.learngene_accuracy[e], c.random_accuracy[e]);
    gain += (c.learngene_accuracy[e] - c.random_accuracy[e]) / 4;
  }
  EXPECT_GT(gain, 0.05);
}

TEST(GeneticTransfer, RejectsBadOptions) {
  EcoOptions o;
  o.population = 0;
  EXPECT_THAT(ValidateEcoOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.population = 2;
  o.mutation_rate = 1.5;
  EXPECT_THAT(ValidateEcoOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CompareInitialisations(Tasks(), Learngene{}, EcoOptions{}, 0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::eco
