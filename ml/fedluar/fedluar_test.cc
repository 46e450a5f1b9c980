#include "ml/fedluar/fedluar.h"

#include <cmath>
#include <map>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

// w1 [0,4) recyclable, b1 [4,5), w2 [5,9) recyclable, w3 [9,11) recyclable.
std::vector<TensorSlice> Tensors() {
  return {{"w1", 0, 4, true}, {"b1", 4, 1, false}, {"w2", 5, 4, true}, {"w3", 9, 2, true}};
}

TEST(LayerScores, KnownAnswerAndBiasesExcluded) {
  const std::vector<TensorSlice> t = {{"w", 0, 2, true}, {"b", 2, 1, false}};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> s,
                              LayerScores(t, std::vector<float>{3, 4, 1}, std::vector<float>{0.3f, 0.4f, 5}));
  EXPECT_NEAR(s[0], 0.5 / (5.0 + 1e-6), 1e-7);
  EXPECT_EQ(s[1], -1.0);
  EXPECT_THAT(LayerScores(t, std::vector<float>{1, 2}, std::vector<float>{1, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LayerScores(t, std::vector<float>{1, 2, 3}, std::vector<float>{1, NAN, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DrawRecycledTensors, SingleDrawFollowsInverseScore) {
  const auto t = Tensors();
  const std::vector<double> scores = {1.0, -1.0, 2.0, 4.0};
  std::map<size_t, int> counts;
  const int trials = 20000;
  for (int round = 0; round < trials; ++round) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto pick, DrawRecycledTensors(t, scores, 1, 42, round));
    ASSERT_EQ(pick.size(), 1u);
    ++counts[pick[0]];
  }
  EXPECT_EQ(counts.count(1), 0u);  // the bias is never recycled
  // p = (1, 1/2, 1/4) / 1.75; 4 standard deviations ~ 0.014.
  EXPECT_NEAR(counts[0] / double{trials}, 1.0 / 1.75, 0.014);
  EXPECT_NEAR(counts[2] / double{trials}, 0.5 / 1.75, 0.014);
  EXPECT_NEAR(counts[3] / double{trials}, 0.25 / 1.75, 0.014);
}

TEST(DrawRecycledTensors, PairInclusionMatchesSuccessiveSampling) {
  const auto t = Tensors();
  const std::vector<double> scores = {1.0, -1.0, 2.0, 4.0};
  const std::vector<double> w = {1.0, 0.5, 0.25};
  // Exact P(pair) = sum over orders of w_a/W * w_b/(W - w_a).
  const double total = 1.75;
  auto pair_prob = [&](int a, int b) {
    return w[a] / total * w[b] / (total - w[a]) + w[b] / total * w[a] / (total - w[b]);
  };
  std::map<std::vector<size_t>, int> counts;
  const int trials = 20000;
  for (int round = 0; round < trials; ++round) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto pick, DrawRecycledTensors(t, scores, 2, 9, round));
    ASSERT_EQ(pick.size(), 2u);
    ASSERT_LT(pick[0], pick[1]);
    ++counts[pick];
  }
  EXPECT_NEAR(counts[std::vector<size_t>({0, 2})] / double{trials}, pair_prob(0, 1), 0.015);
  EXPECT_NEAR(counts[std::vector<size_t>({0, 3})] / double{trials}, pair_prob(0, 2), 0.015);
  EXPECT_NEAR(counts[std::vector<size_t>({2, 3})] / double{trials}, pair_prob(1, 2), 0.015);
}

TEST(DrawRecycledTensors, DeterministicFromSeedAndRound) {
  const auto t = Tensors();
  const std::vector<double> scores = {0.3, -1.0, 0.2, 0.1};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, DrawRecycledTensors(t, scores, 2, 5, 3));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, DrawRecycledTensors(t, scores, 2, 5, 3));
  EXPECT_EQ(a, b);
  int differ = 0;
  for (uint64_t r = 0; r < 20; ++r) {
    auto x = *DrawRecycledTensors(t, scores, 1, 5, r), y = *DrawRecycledTensors(t, scores, 1, 6, r);
    differ += x != y;
  }
  EXPECT_GT(differ, 0);
  // Zero scores are clamped, not infinite.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto z, DrawRecycledTensors(t, {0.0, -1.0, 0.0, 1.0}, 2, 1, 1));
  EXPECT_EQ(z, (std::vector<size_t>{0, 2}));
  EXPECT_THAT(DrawRecycledTensors(t, scores, 4, 5, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DrawRecycledTensors(t, {0.1, -1, NAN, 0.1}, 1, 5, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DrawRecycledTensors(t, {0.1}, 1, 5, 3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FedLuarState, RecycledTensorReusesTheLastUpdateAndKeepsItsScore) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, FedLuarState::Create(Tensors(), 11, {.num_recycled = 2, .seed = 3}));
  EXPECT_TRUE(s->recycled().empty());  // round 1 aggregates everything
  EXPECT_EQ(s->packed_size(), 11);
  std::vector<float> weights(11, 1.0f), u1(11);
  for (int i = 0; i < 11; ++i) u1[i] = 0.01f * (i + 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto full1, s->FinishRound(weights, u1));
  EXPECT_EQ(full1, u1);
  EXPECT_EQ(s->round(), 2u);
  ASSERT_EQ(s->recycled().size(), 2u);
  const std::vector<double> scores_after_1 = s->scores();
  // Round 2: clients upload only the fresh tensors.
  int64_t expect_packed = 11;
  for (size_t t : s->recycled()) {
    EXPECT_TRUE(Tensors()[t].recyclable);
    expect_packed -= Tensors()[t].size;
  }
  ASSERT_EQ(s->packed_size(), expect_packed);
  std::vector<float> u2(11, -0.5f);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto packed, s->PackUpdate(u2));
  ASSERT_EQ(static_cast<int64_t>(packed.size()), expect_packed);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto unpacked, s->UnpackUpdate(packed));
  const std::vector<size_t> recycled2 = s->recycled();
  TANDEM_ASSERT_OK_AND_ASSIGN(auto full2, s->FinishRound(weights, packed));
  for (size_t t = 0; t < 4; ++t) {
    const TensorSlice ts = Tensors()[t];
    const bool rec = std::count(recycled2.begin(), recycled2.end(), t) > 0;
    for (int64_t i = ts.offset; i < ts.offset + ts.size; ++i) {
      EXPECT_EQ(unpacked[i], rec ? 0.0f : -0.5f);
      EXPECT_EQ(full2[i], rec ? u1[i] : -0.5f) << ts.name;
    }
    if (rec) {
      EXPECT_EQ(s->scores()[t], scores_after_1[t]);
    } else if (ts.recyclable) {
      EXPECT_NE(s->scores()[t], scores_after_1[t]);
    }
  }
}

// A restored state continues exactly like the original (coordinator restart).
TEST(FedLuarState, RestoredSnapshotContinuesIdentically) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, FedLuarState::Create(Tensors(), 11, {.num_recycled = 1, .seed = 5}));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, FedLuarState::Create(Tensors(), 11, {.num_recycled = 1, .seed = 5}));
  std::vector<float> weights(11, 1.0f), u(11);
  for (int i = 0; i < 11; ++i) u[i] = 0.03f * (i + 1);
  TANDEM_ASSERT_OK(a->FinishRound(weights, u).status());
  TANDEM_ASSERT_OK(b->Restore(a->Save()));
  EXPECT_EQ(b->round(), a->round());
  EXPECT_EQ(b->recycled(), a->recycled());
  for (int r = 0; r < 3; ++r) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto pa, a->PackUpdate(u));
    TANDEM_ASSERT_OK_AND_ASSIGN(auto pb, b->PackUpdate(u));
    ASSERT_EQ(pa, pb);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto fa, a->FinishRound(weights, pa));
    TANDEM_ASSERT_OK_AND_ASSIGN(auto fb, b->FinishRound(weights, pb));
    EXPECT_EQ(fa, fb);
    EXPECT_EQ(a->recycled(), b->recycled());
    for (float& x : u) x *= -0.7f;
  }
  FedLuarState::Snapshot bad = a->Save();
  bad.recycled = {1};  // b1 is a bias: never recycled
  EXPECT_THAT(b->Restore(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = a->Save();
  bad.last_update.pop_back();
  EXPECT_THAT(b->Restore(bad), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FedLuarState, Validation) {
  EXPECT_THAT(FedLuarState::Create(Tensors(), 11, {.num_recycled = 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FedLuarState::Create(Tensors(), 10, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FedLuarState::Create({{"a", 0, 4, true}, {"b", 2, 4, true}}, 8, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, FedLuarState::Create(Tensors(), 11, {.num_recycled = 1}));
  EXPECT_THAT(s->PackUpdate(std::vector<float>(10)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s->UnpackUpdate(std::vector<float>(12)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s->FinishRound(std::vector<float>(11), std::vector<float>(11, NAN)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s->FinishRound(std::vector<float>(3), std::vector<float>(11)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
