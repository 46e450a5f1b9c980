#include "ml/train/trainer.h"

#include <random>

#include "base/clock.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Dataset> d = LoadDigitsCsv();
    ASSERT_THAT(d.status(), tandem::testing::IsOk());
    auto split = TrainTestSplit(*d, 0.25, 11);
    ASSERT_TRUE(split.ok());
    train_ = std::move(split->first);
    test_ = std::move(split->second);
  }
  Dataset train_, test_;
};

TEST_F(TrainerTest, ShardedGradientMatchesSingleShard) {
  auto model = *MakeMlp(64, {32}, 10);
  model->InitFromSeed(1);
  auto one = *GradientEngine::Create(1), two = *GradientEngine::Create(2);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 64; ++i) rows.push_back(i * 3);
  std::vector<float> g1, g2, g2b;
  TANDEM_ASSERT_OK_AND_ASSIGN(BatchStats s1, one->ComputeGradient(*model, train_, rows, &g1));
  TANDEM_ASSERT_OK_AND_ASSIGN(BatchStats s2, two->ComputeGradient(*model, train_, rows, &g2));
  TANDEM_ASSERT_OK(two->ComputeGradient(*model, train_, rows, &g2b).status());
  EXPECT_EQ(g2, g2b);  // same shard count: bit-identical
  EXPECT_EQ(s1.correct, s2.correct);
  EXPECT_NEAR(s1.loss_sum, s2.loss_sum, 1e-3);
  ASSERT_EQ(g1.size(), g2.size());
  for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g1[i], g2[i], 1e-5) << i;
}

// ApplyStep splits the update over the arena (the model is large enough to
// split) and gives bit-identically the single-threaded optimizer step.
TEST_F(TrainerTest, ApplyStepOnTwoThreadsMatchesOptimizerStep) {
  auto a = *MakeMlp(64, {512}, 10);
  a->InitFromSeed(2);
  auto b = a->Clone();
  ASSERT_GT(a->num_params(), 32768);
  auto two = *GradientEngine::Create(2);
  auto opt_a = *CreateAdam({}), opt_b = *CreateAdam({});
  std::vector<int64_t> rows(32);
  std::vector<float> grad;
  for (int step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < 32; ++i) rows[i] = (step * 32 + i) % train_.size();
    TANDEM_ASSERT_OK(two->ComputeGradient(*a, train_, rows, &grad).status());
    TANDEM_ASSERT_OK(two->ApplyStep(*opt_a, *a, grad));
    TANDEM_ASSERT_OK(opt_b->Step(b->mutable_params(), grad));
    for (int64_t i = 0; i < a->num_params(); ++i) {
      ASSERT_EQ(a->params()[i], b->params()[i]) << "step " << step << " index " << i;
    }
  }
  auto init = *MakeMlp(64, {512}, 10);
  init->InitFromSeed(2);
  EXPECT_NE(a->Flatten(), init->Flatten());  // the steps moved the parameters
}

TEST_F(TrainerTest, MlpLearnsDigits) {
  auto model = *MakeMlp(64, {64}, 10);
  model->InitFromSeed(2);
  auto engine = *GradientEngine::Create(2);
  auto opt = *CreateSgd({.learning_rate = 0.1, .momentum = 0.9});
  std::mt19937_64 gen(3);
  std::vector<int64_t> all(static_cast<size_t>(train_.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  TANDEM_ASSERT_OK_AND_ASSIGN(EvalStats before, engine->Evaluate(*model, test_));
  EpochStats last;
  for (int e = 0; e < 10; ++e) {
    TANDEM_ASSERT_OK_AND_ASSIGN(
        last, TrainEpoch(*model, *opt, *engine, train_, all, {32}, gen, *RealClock::Default()));
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(EvalStats after, engine->Evaluate(*model, test_));
  EXPECT_LT(before.accuracy, 0.3);
  EXPECT_GT(after.accuracy, 0.94);
  EXPECT_LT(after.loss, before.loss);
  EXPECT_GT(last.samples_per_second, 0);
  EXPECT_GT(last.accuracy, 0.95);
}

TEST_F(TrainerTest, EmbedAndLossGivesPenultimateActivations) {
  auto model = *MakeMlp(64, {16, 8}, 10);
  model->InitFromSeed(4);
  auto engine = *GradientEngine::Create(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(EmbeddingsAndLosses el, engine->EmbedAndLoss(*model, test_, 100));
  ASSERT_EQ(el.embeddings.rows(), test_.size());
  EXPECT_EQ(el.embeddings.cols(), 8);
  ASSERT_EQ(static_cast<int64_t>(el.losses.size()), test_.size());
  Activations a;
  TANDEM_ASSERT_OK(model->Forward(test_.features.middleRows(300, 2), &a));
  EXPECT_TRUE(el.embeddings.row(301).isApprox(a.embeddings().row(1)));
  double mean = 0;
  for (float l : el.losses) mean += l / el.losses.size();
  TANDEM_ASSERT_OK_AND_ASSIGN(EvalStats e, engine->Evaluate(*model, test_));
  EXPECT_NEAR(mean, e.loss, 1e-4);
}

TEST_F(TrainerTest, RejectsBadInputs) {
  EXPECT_THAT(GradientEngine::Create(0), StatusIs(absl::StatusCode::kInvalidArgument));
  auto model = *MakeMlp(64, {8}, 10);
  auto wrong = *MakeMlp(65, {8}, 10);
  auto engine = *GradientEngine::Create(1);
  std::vector<float> g;
  EXPECT_THAT(engine->ComputeGradient(*model, train_, {}, &g),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine->ComputeGradient(*model, train_, std::vector<int64_t>{-1}, &g),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine->ComputeGradient(*wrong, train_, std::vector<int64_t>{0}, &g),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine->Evaluate(*wrong, test_), StatusIs(absl::StatusCode::kInvalidArgument));
  auto opt = *CreateSgd({});
  std::mt19937_64 gen(1);
  EXPECT_THAT(TrainEpoch(*model, *opt, *engine, train_, {}, {32}, gen, *RealClock::Default()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
