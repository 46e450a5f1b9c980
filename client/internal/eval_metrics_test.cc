#include "client/internal/eval_metrics.h"

#include <cmath>
#include <numeric>
#include <random>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"
#include "ml/train/trainer.h"

namespace tandem::client {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

proto::EvaluationConfig Config(uint32_t m, double loss_clip = 10, uint32_t classes = 4) {
  proto::EvaluationConfig c;
  c.set_max_examples(m);
  c.set_loss_clip(loss_clip);
  c.set_num_classes(classes);
  c.set_metrics_version(1);
  return c;
}

ml::Dataset RandomData(int64_t n, int64_t cols, int classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(0, 1);
  ml::Dataset d;
  d.num_classes = classes;
  d.shape = {1, 1, cols};
  d.features.resize(n, cols);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < cols; ++j) d.features(i, j) = u(gen);
    d.labels.push_back(static_cast<int>(gen() % classes));
  }
  return d;
}

// The counts agree with the trainer's own evaluation (another
// implementation of the same loss and argmax) when nothing is clipped.
TEST(EvalMetricsTest, CountsAgreeWithTheTrainersEvaluation) {
  auto model = ml::MakeMlp(8, {6}, 4);
  ASSERT_THAT(model, IsOk());
  (*model)->InitFromSeed(3);
  const ml::Dataset data = RandomData(300, 8, 4, 1);
  auto counts = CountEvaluation(**model, data, Config(1000));
  ASSERT_THAT(counts, IsOk());
  auto engine = ml::GradientEngine::Create(1);
  auto stats = (*engine)->Evaluate(**model, data);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(counts->examples, 300);
  EXPECT_NEAR(counts->correct, stats->accuracy * 300, 1e-6);
  EXPECT_NEAR(counts->loss_sum / 300, stats->loss, 1e-4);
  EXPECT_EQ(std::accumulate(counts->class_examples.begin(), counts->class_examples.end(), 0), 300);
  EXPECT_EQ(std::accumulate(counts->class_correct.begin(), counts->class_correct.end(), 0),
            counts->correct);
}

TEST(EvalMetricsTest, AClientCountsAtMostMExamplesAndClipsTheLoss) {
  auto model = ml::MakeMlp(8, {6}, 4);
  ASSERT_THAT(model, IsOk());
  (*model)->InitFromSeed(3);
  const ml::Dataset data = RandomData(300, 8, 4, 2);
  auto counts = CountEvaluation(**model, data, Config(50, /*loss_clip=*/0.01));
  ASSERT_THAT(counts, IsOk());
  EXPECT_EQ(counts->examples, 50);
  // Every untrained example loses more than 0.01 nats: all clipped.
  EXPECT_NEAR(counts->loss_sum, 50 * 0.01, 1e-9);
}

TEST(EvalMetricsTest, TheVectorStaysWithinSqrt5ForAnyHonestCounts) {
  std::mt19937_64 gen(9);
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t m = 1 + gen() % 200;
    const proto::EvaluationConfig c = Config(m, 5, 7);
    EvalCounts e;
    e.class_examples.assign(7, 0);
    e.class_correct.assign(7, 0);
    const int64_t n = gen() % (m + 1);
    for (int64_t i = 0; i < n; ++i) {
      const int label = static_cast<int>(gen() % 7);
      ++e.examples;
      ++e.class_examples[label];
      if (gen() % 2) {
        ++e.correct;
        ++e.class_correct[label];
      }
      e.loss_sum += 5.0 * (gen() % 1000) / 999.0;
    }
    auto v = EncodeEvaluationMetrics(e, c);
    ASSERT_THAT(v, IsOk());
    ASSERT_EQ(v->size(), 3u + 2 * 7);
    double l2 = 0;
    for (float x : *v) l2 += static_cast<double>(x) * x;
    EXPECT_LE(std::sqrt(l2), std::sqrt(5.0) + 1e-6);
    EXPECT_NEAR((*v)[0] * m, static_cast<double>(e.examples), 1e-3);
  }
}

TEST(EvalMetricsTest, InconsistentCountsAndConfigsAreRefused) {
  EvalCounts e;
  e.examples = 3;
  e.correct = 2;
  e.loss_sum = 1;
  e.class_examples = {2, 1};
  e.class_correct = {1, 1};
  const proto::EvaluationConfig c = Config(10, 10, 2);
  EXPECT_THAT(EncodeEvaluationMetrics(e, c), IsOk());
  EvalCounts bad = e;
  bad.examples = 11;  // above m
  bad.class_examples = {10, 1};
  EXPECT_THAT(EncodeEvaluationMetrics(bad, c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = e;
  bad.class_correct = {2, 1};  // per-class correct not summing to the total
  EXPECT_THAT(EncodeEvaluationMetrics(bad, c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = e;
  bad.loss_sum = 31;  // above examples * L
  EXPECT_THAT(EncodeEvaluationMetrics(bad, c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::EvaluationConfig v2 = c;
  v2.set_metrics_version(2);
  EXPECT_THAT(EncodeEvaluationMetrics(e, v2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckEvaluationConfig(Config(0)), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::client
