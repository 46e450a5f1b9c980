// tandem-sim's models (sim_models.h), the simulated clients' error-feedback
// memories (client_memory.h) and how a run's options set PREAMBLE's block
// geometry and selection (LogBlocksPerGroup, SimTaskOptions).
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"
#include "server/core/secure_sum.h"
#include "server/sim/client_memory.h"
#include "server/sim/federation.h"
#include "server/sim/private_mean.h"
#include "server/sim/sim_models.h"

namespace tandem::sim {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

int CountWeightTensors(const ml::Model& model) {
  int n = 0;
  for (const ml::ParamInfo& p : model.param_infos()) n += p.recyclable() ? 1 : 0;
  return n;
}

TEST(MakeSimModel, MlpIsMakeMlp) {
  auto m = MakeSimModel("mlp", 784, {32}, 10);
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ((*m)->input_size(), 784);
  EXPECT_EQ((*m)->output_size(), 10);
  EXPECT_EQ((*m)->num_params(), 784 * 32 + 32 + 32 * 10 + 10);
  EXPECT_EQ(CountWeightTensors(**m), 2);
  // Any feature count: an MLP needs no image.
  EXPECT_THAT(MakeSimModel("mlp", 785, {16, 8}, 3), IsOk());
}

TEST(MakeSimModel, CnnIsTheZoosCnnOnSquareImages) {
  auto m = MakeSimModel("cnn", 28 * 28, {32}, 10);
  ASSERT_THAT(m, IsOk());
  auto zoo = ml::MakeCnn(ml::ImageShape{1, 28, 28}, 10);
  ASSERT_THAT(zoo, IsOk());
  EXPECT_EQ((*m)->num_params(), (*zoo)->num_params());
  EXPECT_EQ((*m)->Fingerprint(), (*zoo)->Fingerprint());
  EXPECT_EQ(CountWeightTensors(**m), 4);
}

TEST(MakeSimModel, DeepCnnHasEightWeightTensors) {
  auto m = MakeSimModel("deep_cnn", 28 * 28, {}, 10);
  ASSERT_THAT(m, IsOk());
  const ml::Model& model = **m;
  EXPECT_EQ(model.input_size(), 784);
  EXPECT_EQ(model.output_size(), 10);
  EXPECT_GE(CountWeightTensors(model), 8);
  EXPECT_EQ(model.param_infos().size(), 16u);  // 8 weights, 8 biases
  // conv 1->8, 8->8, 8->16, 16->16, 16->16, 16->16 (3x3, with bias), then
  // fc 7*7*16 -> 32 and 32 -> 10.
  const int64_t convs = (8 * 1 * 9 + 8) + (8 * 8 * 9 + 8) + (16 * 8 * 9 + 16) +
                        3 * (16 * 16 * 9 + 16);
  EXPECT_EQ(model.num_params(), convs + (7 * 7 * 16 * 32 + 32) + (32 * 10 + 10));
  // Two images through the initialised model give finite logits.
  std::unique_ptr<ml::Model> init = model.Clone();
  init->InitFromSeed(3);
  ml::Matrix x = ml::Matrix::Constant(2, 784, 0.5f);
  auto logits = init->Predict(x);
  ASSERT_THAT(logits, IsOk());
  EXPECT_EQ(logits->rows(), 2);
  EXPECT_EQ(logits->cols(), 10);
  EXPECT_TRUE(logits->allFinite());
}

TEST(MakeSimModel, RejectsUnknownNamesAndNonSquareImages) {
  EXPECT_THAT(MakeSimModel("resnet", 784, {32}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mlp, cnn or deep_cnn")));
  EXPECT_THAT(MakeSimModel("cnn", 785, {}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("square")));
  EXPECT_THAT(MakeSimModel("deep_cnn", 7 * 7, {}, 10),  // side < 8
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("square")));
  EXPECT_THAT(MakeSimModel("deep_cnn", 64, {}, 10), IsOk());  // 8x8: the smallest
}

// D = 8: k = 2 groups of 2 blocks of B = 2.
server::SecureSum SmallSum(proto::BlockSelection selection) {
  server::SecureSumConfig c;
  c.task_id = "t";
  c.model_dimension = 8;
  c.block_size = 2;
  c.log_blocks_per_group = 1;
  c.block_selection = selection;
  absl::StatusOr<server::SecureSum> sum = server::SecureSum::Create(c);
  EXPECT_THAT(sum, IsOk());
  return *std::move(sum);
}

TEST(ClientMemories, CarriesTheUnsentBlocksToTheNextCall) {
  const server::SecureSum sum = SmallSum(proto::BLOCK_SELECTION_TOP_NORM);
  ASSERT_EQ(sum.num_groups(), 2u);
  ClientMemories memories;
  // Group 0: blocks (1,1) and (3,3): (3,3) is sent. Group 1: (0,5) and
  // (1,0): (0,5) is sent. No memory yet: the update as is.
  const std::vector<float> first = {1, 1, 3, 3, 0, 5, 1, 0};
  EXPECT_THAT(memories.Compensate(7, first, sum), IsOkAndHolds(ElementsAreArray(first)));
  // The next update gets the unsent blocks (1,1) and (1,0) added.
  EXPECT_THAT(memories.Compensate(7, {1, 0, 0, 0, 0, 0, 0, 1}, sum),
              IsOkAndHolds(ElementsAre(2, 1, 0, 0, 0, 0, 1, 1)));
  // That one sent (2,1) and (1,1), its whole mass: nothing is carried on.
  EXPECT_THAT(memories.Compensate(7, {0, 0, 4, 0, 0, 0, 0, 0}, sum),
              IsOkAndHolds(ElementsAre(0, 0, 4, 0, 0, 0, 0, 0)));
  // Each client has its own memory.
  EXPECT_THAT(memories.Compensate(9, {1, 0, 0, 0, 0, 0, 0, 0}, sum),
              IsOkAndHolds(ElementsAre(1, 0, 0, 0, 0, 0, 0, 0)));
  EXPECT_EQ(memories.clients(), 2u);
}

TEST(ClientMemories, ShorterUpdatesAreCompensatedWithinTheirLength) {
  const server::SecureSum sum = SmallSum(proto::BLOCK_SELECTION_TOP_NORM);
  ClientMemories memories;
  // 7 of D = 8 values (the last is the report's zero padding). Group 0
  // sends (3,3); group 1 holds (0,1) and (2, pad 0) and sends the latter.
  ASSERT_THAT(memories.Compensate(1, {1, 1, 3, 3, 0, 1, 2}, sum), IsOk());
  EXPECT_THAT(memories.Compensate(1, std::vector<float>(7, 0.f), sum),
              IsOkAndHolds(ElementsAre(1, 1, 0, 0, 0, 1, 0)));
  // A length change (FedLUAR recycled other tensors) drops the memory.
  ASSERT_THAT(memories.Compensate(2, {1, 1, 3, 3, 0, 0}, sum), IsOk());
  EXPECT_THAT(memories.Compensate(2, {0, 0, 0, 0}, sum), IsOkAndHolds(ElementsAre(0, 0, 0, 0)));
  // Longer than the round's D.
  EXPECT_THAT(memories.Compensate(3, std::vector<float>(9, 1.f), sum),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClientMemories, RandomRoundsAreUntouched) {
  const server::SecureSum sum = SmallSum(proto::BLOCK_SELECTION_RANDOM);
  ClientMemories memories;
  const std::vector<float> u = {1, 1, 3, 3, 0, 5, 1, 0};
  EXPECT_THAT(memories.Compensate(7, u, sum), IsOkAndHolds(ElementsAreArray(u)));
  EXPECT_THAT(memories.Compensate(7, u, sum), IsOkAndHolds(ElementsAreArray(u)));
  EXPECT_EQ(memories.clients(), 0u);
}

// 25,450 parameters (the default MLP on Fashion-MNIST), B = 256: 100 blocks.
TEST(LogBlocksPerGroup, PicksTheGroupCountNearestTheFraction) {
  FederationOptions o;
  o.block_size = 256;
  o.log_blocks_per_group = 5;
  constexpr uint64_t kDim = 25450;
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(5u));  // fraction unset
  o.blocks_fraction = 1.0;
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(0u));  // k = 100
  o.blocks_fraction = 0.5;
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(1u));  // k = 50
  o.blocks_fraction = 0.25;
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(2u));  // k = 25
  o.blocks_fraction = 0.1;  // target 10: k = 13 (d = 3) is nearer than 7 (d = 4)
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(3u));
  o.blocks_fraction = 1e-6;  // at least one group: 2^7 >= 100 blocks
  EXPECT_THAT(LogBlocksPerGroup(o, kDim), IsOkAndHolds(7u));
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    o.blocks_fraction = bad;
    EXPECT_THAT(LogBlocksPerGroup(o, kDim), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

TEST(SimTaskOptions, BlockOptionsApplyToPrivateRunsOnly) {
  FederationOptions o;
  o.block_size = 256;
  o.log_blocks_per_group = 1;
  o.blocks_fraction = 0.25;
  o.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  auto priv = SimTaskOptions(o, 25450);
  ASSERT_THAT(priv, IsOk());
  EXPECT_EQ(priv->secure_sum.log_blocks_per_group, 2u);
  EXPECT_EQ(priv->secure_sum.block_selection, proto::BLOCK_SELECTION_TOP_NORM);
  o.private_aggregation = false;  // the clear baseline
  auto clear = SimTaskOptions(o, 25450);
  ASSERT_THAT(clear, IsOk());
  EXPECT_EQ(clear->secure_sum.log_blocks_per_group, 1u);
  EXPECT_EQ(clear->secure_sum.block_selection, proto::BLOCK_SELECTION_RANDOM);
}

}  // namespace
}  // namespace tandem::sim
