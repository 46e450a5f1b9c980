// SpamAssassin through the project's own install script: tokenisation,
// loading with natural groups, and an embedding-bag model that learns it.
#include "ml/data/text_dataset.h"

#include <memory>
#include <random>
#include <set>
#include <vector>

#include "base/clock.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/basic_layers.h"
#include "ml/model/embedding_bag.h"
#include "ml/model/model.h"
#include "ml/optim/optimizer.h"
#include "ml/train/trainer.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

TEST(TokenizeEmail, SubjectAndBodyLowercasedDedupedHeadersSkipped) {
  TextOptions o;
  o.vocab = 1 << 20;
  o.bag_size = 16;
  const std::string raw =
      "From: a@b.c\nSubject: Cheap PILLS now\nX-Mailer: zzheaderzz\n\nbuy cheap pills, BUY now! x\n";
  const std::vector<int64_t> ids = TokenizeEmail(raw, o);
  // subject: cheap, pills, now; body: buy (new), cheap/pills/buy/now repeats; "x" too short.
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size());
  const std::vector<int64_t> again =
      TokenizeEmail("Subject: cheap pills NOW\n\nbuy", o);
  EXPECT_EQ(again, ids);  // case-insensitive, same order of first appearance
  o.bag_size = 2;
  EXPECT_EQ(TokenizeEmail(raw, o).size(), 2u);
  for (int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 1 << 20);
  }
}

TEST(SpamAssassin, LoadsFoldersAsNaturalGroups) {
  TextOptions o;
  o.max_per_group = 40;
  auto d = LoadSpamAssassin(kSpamAssassinDir, o);
  ASSERT_THAT(d.status(), ::tandem::testing::IsOk()) << "install it with deploy/install-deps.sh";
  EXPECT_EQ(d->size(), 200);
  EXPECT_EQ(d->num_classes, 2);
  TANDEM_EXPECT_OK(d->Validate());
  int spam = 0;
  std::set<int> groups;
  for (int64_t i = 0; i < d->size(); ++i) {
    spam += d->labels[i];
    groups.insert(d->groups[i]);
    EXPECT_EQ(d->labels[i], d->groups[i] >= 3 ? 1 : 0);
  }
  EXPECT_EQ(spam, 80);
  EXPECT_EQ(groups.size(), 5u);
  // Most emails fill a good part of the bag.
  int64_t nonempty = 0;
  for (int64_t i = 0; i < d->size(); ++i) nonempty += d->features(i, 0) >= 0;
  EXPECT_GT(nonempty, 190);
}

TEST(SpamAssassin, MissingInstallIsAClearError) {
  EXPECT_THAT(LoadSpamAssassin("/nonexistent/spam"),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("install-deps.sh")));
  TextOptions bad;
  bad.bag_size = 0;
  EXPECT_THAT(LoadSpamAssassin(kSpamAssassinDir, bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SpamAssassin, EmbeddingBagClassifierLearnsSpam) {
  TextOptions o;
  o.max_per_group = 120;
  o.vocab = 1 << 13;
  o.bag_size = 96;
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset all, LoadSpamAssassin(kSpamAssassinDir, o));
  std::vector<int64_t> idx(all.size());
  for (int64_t i = 0; i < all.size(); ++i) idx[i] = i;
  std::mt19937_64 gen(5);
  std::shuffle(idx.begin(), idx.end(), gen);
  const int64_t n_test = all.size() / 5;
  const std::vector<int64_t> test_idx(idx.begin(), idx.begin() + n_test);
  const std::vector<int64_t> train_idx(idx.begin() + n_test, idx.end());
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset test, all.Subset(test_idx));
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset train, all.Subset(train_idx));

  std::vector<std::unique_ptr<Layer>> layers;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto emb, EmbeddingBagLayer::Create("emb", o.vocab, 16, o.bag_size));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto out, DenseLayer::Create("out", 16, 2));
  layers.push_back(std::move(emb));
  layers.push_back(std::move(out));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto model, Model::Create(std::move(layers)));
  model->InitFromSeed(3);
  AdamOptions ao;
  ao.learning_rate = 0.02;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto opt, CreateAdam(ao));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto engine, GradientEngine::Create(1));
  TANDEM_ASSERT_OK_AND_ASSIGN(EvalStats before, engine->Evaluate(*model, test));
  std::vector<int64_t> rows(train.size());
  for (int64_t i = 0; i < train.size(); ++i) rows[i] = i;
  for (int epoch = 0; epoch < 8; ++epoch) {
    TANDEM_ASSERT_OK(TrainEpoch(*model, *opt, *engine, train, rows, {32}, gen,
                                *RealClock::Default())
                         .status());
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(EvalStats after, engine->Evaluate(*model, test));
  // 60% ham: a constant guess gets 0.6; the bag-of-words model gets ~0.95.
  EXPECT_GT(after.accuracy, 0.85) << "before " << before.accuracy;
  EXPECT_LT(after.loss, before.loss);
}

}  // namespace
}  // namespace tandem::ml
