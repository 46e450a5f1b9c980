#include "ml/kernels/spotlight_train.h"

#include <cmath>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

TEST(SpotlightTrain, AnalyticGradientMatchesFiniteDifferences) {
  const int64_t d = 32;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Random(d, 21, 0.5f));
  const Tensor q = RandomTensor({6, d}, 22), k = RandomTensor({40, d}, 23);
  SpotlightLossOptions opt;
  opt.gamma = 0.5f;  // smooth soft sign for a stable finite difference
  opt.top_fraction = 0.1f;
  opt.beta = 0.2f;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightLossResult r, SpotlightRankingLoss(q, k, w, opt));
  EXPECT_GT(r.pairs, 0);
  EXPECT_GT(r.loss, 0);
  Tensor* params[] = {&w.w1, &w.b1, &w.w2, &w.b2};
  const Tensor* grads[] = {&r.grads.w1, &r.grads.b1, &r.grads.w2, &r.grads.b2};
  const float eps = 1e-2f;
  int checked = 0;
  for (int t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < params[t]->size(); i += 97) {
      float& p = params[t]->mutable_data()[i];
      const float keep = p;
      p = keep + eps;
      const double up = SpotlightRankingLoss(q, k, w, opt)->loss;
      p = keep - eps;
      const double down = SpotlightRankingLoss(q, k, w, opt)->loss;
      p = keep;
      const double fd = (up - down) / (2 * eps);
      EXPECT_NEAR(grads[t]->data()[i], fd, 2e-3 + 0.05 * std::fabs(fd)) << t << " " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(SpotlightTrain, AdamWStepsReduceTheLoss) {
  const int64_t d = 32;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Random(d, 31));
  const Tensor q = RandomTensor({16, d}, 32), k = RandomTensor({200, d}, 33);
  SpotlightLossOptions loss;
  loss.gamma = 4.0f;
  loss.top_fraction = 0.05f;
  AdamWOptions adam;
  adam.lr = 1e-2f;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightTrainer trainer, SpotlightTrainer::Create(w, loss, adam));
  TANDEM_ASSERT_OK_AND_ASSIGN(double first, trainer.Step(q, k));
  double last = first;
  for (int s = 0; s < 40; ++s) {
    TANDEM_ASSERT_OK_AND_ASSIGN(last, trainer.Step(q, k));
  }
  EXPECT_EQ(trainer.steps(), 41);
  EXPECT_LT(last, 0.8 * first) << first << " -> " << last;
}

TEST(SpotlightTrain, CausalMaskCountsPairs) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Zeros(32));
  const Tensor q = RandomTensor({2, 32}, 1), k = RandomTensor({10, 32}, 2);
  SpotlightLossOptions opt;
  opt.top_fraction = 0.2f;
  // Query 0 sees 9 keys: t = ceil(1.8) = 2 -> 14 pairs; query 1 sees 10: 2 * 8 = 16.
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightLossResult r, SpotlightRankingLoss(q, k, w, opt));
  EXPECT_EQ(r.pairs, 30);
  opt.causal = false;
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightLossResult all, SpotlightRankingLoss(q, k, w, opt));
  EXPECT_EQ(all.pairs, 32);
}

TEST(SpotlightTrain, RejectsBadInputs) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SpotlightHashWeights w, SpotlightHashWeights::Zeros(32));
  const Tensor q = RandomTensor({4, 32}, 1), k = RandomTensor({3, 32}, 2);
  EXPECT_THAT(SpotlightRankingLoss(q, k, w, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  SpotlightLossOptions opt;
  opt.top_fraction = 1.0f;
  EXPECT_THAT(SpotlightRankingLoss(k, q, w, opt), StatusIs(absl::StatusCode::kInvalidArgument));
  opt = {};
  opt.causal = false;
  EXPECT_THAT(SpotlightRankingLoss(RandomTensor({1, 32}, 3), RandomTensor({1, 32}, 4), w, opt),
              StatusIs(absl::StatusCode::kInvalidArgument));  // no pair
  AdamWOptions adam;
  adam.lr = -1;
  EXPECT_THAT(SpotlightTrainer::Create(w, {}, adam), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels
