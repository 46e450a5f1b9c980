// CoIDO on sklearn digits with 30% flipped labels: measurable properties of
// the selection against a random subset of the same size.
#include "ml/coido/coido.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>

#include "base/clock.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"
#include "ml/train/trainer.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

class CoidoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Dataset> d = LoadDigitsCsv();
    ASSERT_THAT(d.status(), tandem::testing::IsOk());
    auto split = *TrainTestSplit(*d, 0.25, 3);
    train_ = std::move(split.first);
    test_ = std::move(split.second);
    std::mt19937_64 gen(17);
    noisy_.assign(static_cast<size_t>(train_.size()), false);
    for (int64_t i = 0; i < train_.size(); ++i) {
      if (std::uniform_real_distribution<double>(0, 1)(gen) < 0.3) {
        train_.labels[i] = (train_.labels[i] + 1 + static_cast<int>(gen() % 9)) % 10;
        noisy_[i] = true;
      }
    }
    // Warm-up model: 2 epochs on the noisy data (not yet memorised).
    model_ = *MakeMlp(64, {32}, 10);
    model_->InitFromSeed(5);
    engine_ = *GradientEngine::Create(1);
    auto opt = *CreateSgd({.learning_rate = 0.05, .momentum = 0.9});
    std::vector<int64_t> all(static_cast<size_t>(train_.size()));
    std::iota(all.begin(), all.end(), 0);
    for (int e = 0; e < 2; ++e) {
      ASSERT_TRUE(TrainEpoch(*model_, *opt, *engine_, train_, all, {32}, gen, *RealClock::Default()).ok());
    }
    el_ = *engine_->EmbedAndLoss(*model_, train_);
  }

  double NoiseRate(const std::vector<int64_t>& idx) const {
    double n = 0;
    for (int64_t i : idx) n += noisy_[i];
    return n / static_cast<double>(idx.size());
  }
  double MeanLoss(const std::vector<int64_t>& idx) const {
    double s = 0;
    for (int64_t i : idx) s += el_.losses[i];
    return s / static_cast<double>(idx.size());
  }
  std::vector<int64_t> RandomSubset(size_t k, uint64_t seed) const {
    std::vector<int64_t> all(static_cast<size_t>(train_.size()));
    std::iota(all.begin(), all.end(), 0);
    std::mt19937_64 gen(seed);
    std::shuffle(all.begin(), all.end(), gen);
    all.resize(k);
    return all;
  }
  double TrainAndTest(const std::vector<int64_t>& idx) {
    auto m = *MakeMlp(64, {32}, 10);
    m->InitFromSeed(99);
    auto opt = *CreateSgd({.learning_rate = 0.05, .momentum = 0.9});
    std::mt19937_64 gen(4);
    for (int e = 0; e < 30; ++e) {
      EXPECT_TRUE(TrainEpoch(*m, *opt, *engine_, train_, idx, {16}, gen, *RealClock::Default()).ok());
    }
    return engine_->Evaluate(*m, test_)->accuracy;
  }

  Dataset train_, test_;
  std::vector<bool> noisy_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<GradientEngine> engine_;
  EmbeddingsAndLosses el_;
};

TEST_F(CoidoTest, HardestSelectionConcentratesHighLossAndNoisySamples) {
  CoidoOptions o;  // paper default: hardest 20%
  TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult r, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
  const auto random = RandomSubset(r.selected.size(), 1);
  EXPECT_EQ(static_cast<int64_t>(r.selected.size()), std::llround(0.2 * train_.size()));
  EXPECT_GT(MeanLoss(r.selected), 1.5 * MeanLoss(random));
  EXPECT_GT(NoiseRate(r.selected), 2.0 * NoiseRate(random));
  // Scorer trained on 20% only; the logs variances moved from their init.
  EXPECT_EQ(static_cast<int64_t>(r.scorer_train_indices.size()), std::llround(0.2 * train_.size()));
  EXPECT_NE(r.log_sigma_importance, 0.0);
  EXPECT_NE(r.log_sigma_diversity, 0.0);
  EXPECT_TRUE(std::isfinite(r.log_sigma_importance) && std::isfinite(r.log_sigma_diversity));
  EXPECT_LT(r.epoch_loss.back(), r.epoch_loss.front());
}

TEST_F(CoidoTest, ScorerGeneralisesToSamplesItNeverSaw) {
  CoidoOptions o;
  TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult r, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
  std::set<int64_t> seen(r.scorer_train_indices.begin(), r.scorer_train_indices.end());
  // Spearman rank correlation between difficulty and loss on unseen samples.
  std::vector<int64_t> unseen;
  for (int64_t i = 0; i < train_.size(); ++i) {
    if (!seen.count(i)) unseen.push_back(i);
  }
  auto ranks = [&](auto key) {
    std::vector<int64_t> order(unseen.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(unseen[a]) < key(unseen[b]); });
    std::vector<double> rk(unseen.size());
    for (size_t i = 0; i < order.size(); ++i) rk[order[i]] = static_cast<double>(i);
    return rk;
  };
  const auto ra = ranks([&](int64_t i) { return r.difficulty[i]; });
  const auto rb = ranks([&](int64_t i) { return el_.losses[i]; });
  double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) ma += ra[i] / ra.size(), mb += rb[i] / rb.size();
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  EXPECT_GT(sab / std::sqrt(saa * sbb), 0.7);
}

TEST_F(CoidoTest, EasiestSelectionBeatsRandomUnderLabelNoise) {
  CoidoOptions o;
  o.direction = CoidoOptions::Direction::kEasiest;
  TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult r, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
  const auto random = RandomSubset(r.selected.size(), 2);
  EXPECT_LT(NoiseRate(r.selected), 0.5 * NoiseRate(random));
  const double acc_coido = TrainAndTest(r.selected), acc_random = TrainAndTest(random);
  EXPECT_GT(acc_coido, acc_random + 0.03) << "coido " << acc_coido << " random " << acc_random;
  // Per-class quotas: every class is represented roughly in proportion.
  std::vector<int> per_class(10);
  for (int64_t i : r.selected) ++per_class[train_.labels[i]];
  for (int c : per_class) EXPECT_GE(c, 15);
}

TEST_F(CoidoTest, DiversityTermSpreadsTheSelectionOverClusters) {
  auto coverage_entropy = [&](const CoidoResult& r) {
    std::vector<double> h(10, 0.0);
    for (int64_t i : r.selected) h[r.clusters[i]] += 1.0 / r.selected.size();
    double e = 0;
    for (double p : h) e -= p > 0 ? p * std::log(p) : 0.0;
    return e;
  };
  // Over several seeds (scorer init, 20% sample, k-means): the diversity term
  // spreads the selection over more clusters on average and in most runs.
  int wins = 0;
  double mean_gain = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CoidoOptions o;
    o.per_class_quota = false;
    o.seed = seed;
    TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult with, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
    o.use_diversity = false;
    TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult without, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
    EXPECT_EQ(with.clusters, without.clusters);
    const double gain = coverage_entropy(with) - coverage_entropy(without);
    std::printf("seed %d: cluster-coverage entropy gain from the diversity term %+.4f\n",
                static_cast<int>(seed), gain);
    wins += gain > 0;
    mean_gain += gain / 5;
  }
  // The effect is small (about +0.007 nats of a 2.30 maximum on this data),
  // but with the diversity gradient removed the gain is exactly 0.
  EXPECT_GE(wins, 3);
  EXPECT_GT(mean_gain, 0.0);
}

TEST_F(CoidoTest, DeterministicAndValidated) {
  CoidoOptions o;
  o.epochs = 2;
  TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult a, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
  TANDEM_ASSERT_OK_AND_ASSIGN(CoidoResult b, CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o));
  EXPECT_EQ(a.selected, b.selected);
  std::vector<float> short_losses(el_.losses.begin(), el_.losses.end() - 1);
  EXPECT_THAT(CoidoSelect(el_.embeddings, short_losses, train_.labels, 10, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<float> bad = el_.losses;
  bad[3] = NAN;
  EXPECT_THAT(CoidoSelect(el_.embeddings, bad, train_.labels, 10, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CoidoSelect(el_.embeddings, el_.losses, train_.labels, 5, o),
              StatusIs(absl::StatusCode::kInvalidArgument));  // labels >= 5
  o.select_fraction = 0;
  EXPECT_THAT(CoidoSelect(el_.embeddings, el_.losses, train_.labels, 10, o),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
