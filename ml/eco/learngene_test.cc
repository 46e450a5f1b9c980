#include "ml/eco/learngene.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/random/distributions.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/eco/genetic_transfer.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml::eco {
namespace {

using ::tandem::testing::StatusIs;

std::unique_ptr<Model> Net(uint64_t seed) {
  auto m = *MakeCnn({1, 8, 8}, 5, {8, 12, 16});
  m->InitFromSeed(seed);
  return m;
}

int64_t Kept(const std::vector<bool>& m) { return std::count(m.begin(), m.end(), true); }

TEST(Learngene, ExtractThenInsertIsTheIdentityOnTheKeptSubTensor) {
  const auto a = Net(1);
  TANDEM_ASSERT_OK_AND_ASSIGN(GeneLayout lay, CnnGeneLayout(*a));
  ASSERT_EQ(lay.layers.size(), 3u);
  EXPECT_EQ(lay.layers[1].group, 9);  // conv2 columns per conv1 channel (3x3)
  EXPECT_EQ(lay.layers[2].group, 4);  // fc1 columns per conv2 channel (2x2 pooled)
  TANDEM_ASSERT_OK_AND_ASSIGN(auto masks, SelectCircuit(*a, lay, 0.5));
  for (size_t l = 0; l < masks.size(); ++l) EXPECT_EQ(Kept(masks[l]), lay.layers[l].units / 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene g, ExtractLearngene(*a, lay, masks));
  EXPECT_EQ(g.num_params(), 4 * 10 + 6 * (4 * 9 + 1) + 8 * (6 * 4 + 1));
  auto b = Net(2);
  const std::vector<float> before = b->Flatten();
  TANDEM_ASSERT_OK(InsertLearngene(g, lay, b.get()));
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene back, ExtractLearngene(*b, lay, masks));
  EXPECT_EQ(back.weights, g.weights);
  // Only kept rows change (kept sub-tensor written, cross inputs zeroed);
  // the head and unkept rows are untouched.
  const std::vector<float> after = b->Flatten();
  int64_t changed = 0, kept_row_entries = 0;
  for (size_t i = 0; i < after.size(); ++i) changed += after[i] != before[i];
  for (size_t l = 0; l < masks.size(); ++l) kept_row_entries += Kept(masks[l]) * (lay.layers[l].in_cols + 1);
  EXPECT_LE(changed, kept_row_entries);
  EXPECT_GT(changed, g.num_params() / 2);
  const GeneLayer& c2 = lay.layers[1];
  for (int64_t u = 0; u < c2.units; ++u) {
    if (!masks[1][u]) continue;
    for (int64_t c = 0; c < c2.in_cols; ++c) {
      if (!masks[0][c / 9]) EXPECT_EQ(after[c2.weight_offset + u * c2.in_cols + c], 0.0f);
    }
  }
  for (int64_t i = 0; i < lay.head.units * lay.head.in_cols; ++i) {
    EXPECT_EQ(after[lay.head.weight_offset + i], before[lay.head.weight_offset + i]);
  }
  EXPECT_TRUE(IsCircuit(*b, lay, masks));
}

TEST(Learngene, ZeroRateMutationKeepsTheGeneBitExact) {
  const auto a = Net(3);
  TANDEM_ASSERT_OK_AND_ASSIGN(GeneLayout lay, CnnGeneLayout(*a));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto masks, SelectCircuit(*a, lay, 0.4));
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene g, ExtractLearngene(*a, lay, masks));
  std::mt19937_64 gen(1);
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene same, MutateLearngene(g, lay, *Net(9), 0.0, gen));
  EXPECT_EQ(same.masks, g.masks);
  EXPECT_EQ(same.weights, g.weights);
}

TEST(Learngene, MutationSwapsUnitsAndKeepsACircuit) {
  const auto a = Net(4);
  TANDEM_ASSERT_OK_AND_ASSIGN(GeneLayout lay, CnnGeneLayout(*a));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto masks, SelectCircuit(*a, lay, 0.5));
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene g, ExtractLearngene(*a, lay, masks));
  std::mt19937_64 gen(5);
  TANDEM_ASSERT_OK_AND_ASSIGN(Learngene m, MutateLearngene(g, lay, *a, 0.25, gen));
  for (size_t l = 0; l < masks.size(); ++l) {
    const int64_t kept = Kept(masks[l]);
    EXPECT_EQ(Kept(m.masks[l]), kept);
    int64_t flips = 0;
    for (size_t u = 0; u < masks[l].size(); ++u) flips += masks[l][u] != m.masks[l][u];
    EXPECT_EQ(flips, 2 * std::llround(0.25 * kept)) << l;
  }
  // Surviving conv1 channels keep their weights (first layer: whole rows).
  const int64_t cols = lay.layers[0].in_cols + 1;
  std::vector<float> g_rows, m_rows;
  for (size_t u = 0, gi = 0, mi = 0; u < masks[0].size(); ++u) {
    if (masks[0][u] && m.masks[0][u]) {
      for (int64_t c = 0; c + 1 < cols; ++c) {
        EXPECT_EQ(g.weights[0][gi * (cols - 1) + c], m.weights[0][mi * (cols - 1) + c]) << u;
      }
    }
    gi += masks[0][u];
    mi += m.masks[0][u];
  }
  auto carrier = Net(6);
  TANDEM_ASSERT_OK(InsertLearngene(m, lay, carrier.get()));
  EXPECT_TRUE(IsCircuit(*carrier, lay, m.masks));
}

TEST(Learngene, CircuitCheckDetectsADanglingUnit) {
  auto a = Net(7);
  TANDEM_ASSERT_OK_AND_ASSIGN(GeneLayout lay, CnnGeneLayout(*a));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto masks, SelectCircuit(*a, lay, 0.5));
  ASSERT_TRUE(IsCircuit(*a, lay, masks));
  // Zero every incoming weight of one kept conv2 channel.
  const GeneLayer& c2 = lay.layers[1];
  const int64_t u = std::find(masks[1].begin(), masks[1].end(), true) - masks[1].begin();
  for (int64_t c = 0; c < c2.in_cols; ++c) a->mutable_params()[c2.weight_offset + u * c2.in_cols + c] = 0;
  EXPECT_FALSE(IsCircuit(*a, lay, masks));
  std::vector<std::vector<bool>> empty = masks;
  empty[2].assign(empty[2].size(), false);
  EXPECT_FALSE(IsCircuit(*a, lay, empty));
  EXPECT_THAT(ExtractLearngene(*a, lay, empty), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Learngene, TournamentReturnsTheBestOfTheDrawnSubset) {
  const std::vector<double> scores = {0.3, 0.9, 0.1, 0.5, 0.7, 0.2};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 a(seed), b(seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(int64_t got, Tournament(scores, 3, a));
    int64_t best = -1;
    for (int i = 0; i < 3; ++i) {
      const int64_t c = absl::Uniform<int64_t>(b, 0, 6);
      if (best < 0 || scores[c] > scores[best]) best = c;
    }
    EXPECT_EQ(got, best) << seed;
  }
  std::mt19937_64 gen(1);
  EXPECT_THAT(Tournament({}, 2, gen), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Learngene, ScoreIsAnExponentialMovingAverage) {
  Learngene g;
  UpdateScore(&g, 0.5, 0.9);
  EXPECT_EQ(g.score, 0.5);
  UpdateScore(&g, 1.0, 0.9);
  EXPECT_NEAR(g.score, 0.55, 1e-15);
  EXPECT_EQ(g.evaluations, 2);
}

TEST(Learngene, LayoutRejectsUnknownLayers) {
  const auto a = Net(1);
  EXPECT_THAT(GeneLayout::FromModel(*a, {"conv1", "nope"}, "out"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GeneLayout::FromModel(*a, {"conv1", "conv2"}, "out"),
              StatusIs(absl::StatusCode::kInvalidArgument));  // head does not chain
  TANDEM_ASSERT_OK_AND_ASSIGN(GeneLayout lay, CnnGeneLayout(*a));
  EXPECT_THAT(SelectCircuit(*a, lay, 0.0), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::eco
