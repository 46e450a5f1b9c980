#include "client/internal/block_selection.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "client/internal/report_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;

// k = 3 groups of 4 blocks of B = 2: D = 24.
constexpr BlockGeometry kGeometry{.num_groups = 3, .blocks_per_group = 4, .block_size = 2};

std::vector<float> RandomVector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

double BlockNormSq(const std::vector<float>& v, uint32_t group, uint32_t block) {
  double s = 0;
  for (uint32_t i = 0; i < kGeometry.block_size; ++i) {
    const size_t at = (group * kGeometry.blocks_per_group + block) * kGeometry.block_size + i;
    if (at < v.size()) s += double{v[at]} * v[at];
  }
  return s;
}

TEST(SelectTopNormBlocks, PicksTheLargestNormBlockOfEachGroup) {
  std::vector<float> v(24, 0.1f);
  v[2 * 2] = 3.0f;          // group 0, block 2: (3, 0.1)
  v[8 + 0] = -2.0f;         // group 1, block 0: a negative entry counts by its square
  v[8 + 3 * 2 + 1] = 1.5f;  // group 1, block 3: smaller than block 0
  v[16 + 1 * 2] = 0.5f;     // group 2, block 1
  v[16 + 1 * 2 + 1] = 0.5f;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> idx, SelectTopNormBlocks(v, kGeometry));
  EXPECT_THAT(idx, ElementsAre(2, 0, 1));
}

TEST(SelectTopNormBlocks, NoUnselectedBlockIsLargerOnRandomVectors) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<float> v = RandomVector(24, seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> idx, SelectTopNormBlocks(v, kGeometry));
    for (uint32_t g = 0; g < 3; ++g) {
      for (uint32_t j = 0; j < 4; ++j) {
        EXPECT_LE(BlockNormSq(v, g, j), BlockNormSq(v, g, idx[g])) << seed << " " << g;
      }
    }
  }
}

TEST(SelectTopNormBlocks, TiesTakeTheLowestIndexAndShortVectorsArePadded) {
  // All zero: block 0 everywhere. 9 entries: group 0 full, group 1 has one.
  std::vector<float> v(9, 0.0f);
  v[8] = -1.0f;  // group 1, block 0
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> idx, SelectTopNormBlocks(v, kGeometry));
  EXPECT_THAT(idx, ElementsAre(0, 0, 0));
  v[6] = 1.0f;  // group 0, block 3 now largest
  TANDEM_ASSERT_OK_AND_ASSIGN(idx, SelectTopNormBlocks(v, kGeometry));
  EXPECT_THAT(idx, ElementsAre(3, 0, 0));
}

TEST(SelectTopNormBlocks, RefusesALongerVectorOrEmptyGeometry) {
  EXPECT_THAT(SelectTopNormBlocks(std::vector<float>(25), kGeometry),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SelectTopNormBlocks(std::vector<float>(1), BlockGeometry{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(UnsentResidual, IsExactlyTheVectorMinusTheSelectedBlocks) {
  const std::vector<float> v = RandomVector(24, 7);
  const std::vector<uint32_t> idx = {1, 3, 0};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<float> r, UnsentResidual(v, idx, kGeometry));
  ASSERT_EQ(r.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t g = static_cast<uint32_t>(i / 8);
    const uint32_t block = static_cast<uint32_t>(i % 8) / 2;
    EXPECT_EQ(r[i], block == idx[g] ? 0.0f : v[i]) << i;
  }
  EXPECT_THAT(UnsentResidual(v, std::vector<uint32_t>{1, 3}, kGeometry),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(UnsentResidual(v, std::vector<uint32_t>{1, 4, 0}, kGeometry),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ErrorFeedback, CompensatesOnlyForTheSameTaskAndLength) {
  ErrorFeedback ef;
  EXPECT_THAT(ef.Compensate("t", std::vector<float>{1, 2}), ElementsAre(1, 2));
  ef.Keep("t", {0.5f, -1.0f});
  EXPECT_THAT(ef.Compensate("t", std::vector<float>{1, 2}), ElementsAre(1.5f, 1.0f));
  EXPECT_THAT(ef.Compensate("other", std::vector<float>{1, 2}), ElementsAre(1, 2));
  EXPECT_THAT(ef.Compensate("t", std::vector<float>{1, 2, 3}), ElementsAre(1, 2, 3));
  ef.Clear();
  EXPECT_TRUE(ef.empty());
}

TEST(ErrorFeedback, SerializeParseRoundTripsAndRefusesForeignBytes) {
  ErrorFeedback ef;
  ef.Keep("task-1", {0.25f, -3.0f, 1e-7f});
  TANDEM_ASSERT_OK_AND_ASSIGN(ErrorFeedback back, ErrorFeedback::Parse(ef.Serialize()));
  EXPECT_EQ(back.task_id(), "task-1");
  EXPECT_THAT(back.residual(), ElementsAre(0.25f, -3.0f, 1e-7f));
  const std::string bytes = ef.Serialize();
  EXPECT_THAT(ErrorFeedback::Parse(bytes.substr(0, bytes.size() - 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ErrorFeedback::Parse(bytes + "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ErrorFeedback::Parse("pending-report bytes"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Sends the top-norm block of each group of (update + memory) in every round,
// as the participant does, and returns what was sent in total.
struct Rounds {
  std::vector<double> sent_total;
  ErrorFeedback ef;
};
Rounds RunRounds(const std::vector<std::vector<float>>& updates) {
  Rounds run;
  run.sent_total.assign(24, 0.0);
  for (const std::vector<float>& u : updates) {
    const std::vector<float> a = run.ef.Compensate("t", u);
    const std::vector<uint32_t> idx = *SelectTopNormBlocks(a, kGeometry);
    const std::vector<float> rest = *UnsentResidual(a, idx, kGeometry);
    for (size_t i = 0; i < a.size(); ++i) run.sent_total[i] += a[i] - rest[i];
    run.ef.Keep("t", rest);
  }
  return run;
}

TEST(ErrorFeedback, NothingIsLostAcrossRounds) {
  // Telescoping: sum of sent vectors + final memory = sum of updates, to
  // float rounding, in every coordinate, although each round sends 1/4.
  std::vector<std::vector<float>> updates;
  for (uint64_t r = 0; r < 12; ++r) updates.push_back(RandomVector(24, 100 + r));
  const Rounds run = RunRounds(updates);
  for (size_t i = 0; i < 24; ++i) {
    double total = 0;
    for (const auto& u : updates) total += u[i];
    EXPECT_NEAR(run.sent_total[i] + run.ef.residual()[i], total, 1e-4) << i;
  }
}

TEST(ErrorFeedback, AConstantUpdateIsFullySentAndTheMemoryStaysBounded) {
  // The same update every round, block norms within a factor 2 of each
  // other: the memory of an unsent block grows until it is the largest, so
  // every coordinate is sent within a few rounds and no memory exceeds a few
  // rounds' worth of its update.
  std::vector<float> u(24);
  for (size_t i = 0; i < 24; ++i) u[i] = 1.0f + static_cast<float>(i % 8) / 8.0f;
  const Rounds run = RunRounds(std::vector<std::vector<float>>(32, u));
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_GE(run.sent_total[i], 32 * u[i] - 8 * u[i]) << i;
    EXPECT_LE(std::abs(run.ef.residual()[i]), 8 * u[i]) << i;
  }
  // Without memory, top-norm selection sends the same block (the last, the
  // largest) of each group forever.
  EXPECT_THAT(*SelectTopNormBlocks(u, kGeometry), ElementsAre(3, 3, 3));
}

TEST(ErrorFeedback, IsDeterministic) {
  std::vector<std::vector<float>> updates;
  for (uint64_t r = 0; r < 5; ++r) updates.push_back(RandomVector(24, 40 + r));
  EXPECT_EQ(RunRounds(updates).ef.residual(), RunRounds(updates).ef.residual());
}

}  // namespace
}  // namespace tandem::client
