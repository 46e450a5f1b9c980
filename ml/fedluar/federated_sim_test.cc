#include "ml/fedluar/federated_sim.h"

#include <cstdio>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/data/partition.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;

class FederatedSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Dataset> d = LoadDigitsCsv();
    ASSERT_THAT(d.status(), tandem::testing::IsOk());
    auto split = *TrainTestSplit(*d, 0.25, 5);
    test_ = std::move(split.second);
    // 10 clients, Dirichlet(0.5) label skew.
    Partition p = *PartitionDirichlet(split.first.labels, 10, 10, 0.5, 8, 10);
    for (const auto& idx : p) clients_.push_back(*split.first.Subset(idx));
    model_ = *MakeMlp(64, {32, 32}, 10);
    model_->InitFromSeed(9);
  }
  std::vector<Dataset> clients_;
  Dataset test_;
  std::unique_ptr<Model> model_;
};

TEST_F(FederatedSimTest, FedAvgReachesNinetyPercentOnNonIidDigits) {
  FederatedOptions o;
  o.rounds = 30;
  o.clients_per_round = 5;
  o.local_steps = 10;
  o.eval_every = 10;
  TANDEM_ASSERT_OK_AND_ASSIGN(FederatedResult r, SimulateFederated(*model_, clients_, test_, o));
  ASSERT_EQ(r.rounds.size(), 30u);
  EXPECT_GT(r.final_accuracy, 0.90);
  EXPECT_GT(r.final_accuracy, r.rounds[9].test_accuracy - 0.02);
  EXPECT_EQ(r.rounds[0].bytes_uploaded, 5 * model_->num_params() * 4);
  EXPECT_EQ(r.total_bytes, 30 * 5 * model_->num_params() * 4);
  // Deterministic.
  TANDEM_ASSERT_OK_AND_ASSIGN(FederatedResult again, SimulateFederated(*model_, clients_, test_, o));
  EXPECT_EQ(r.final_params, again.final_params);
}

TEST_F(FederatedSimTest, FedLuarUploadsLessAtSimilarAccuracy) {
  FederatedOptions o;
  o.rounds = 30;
  o.clients_per_round = 5;
  o.local_steps = 10;
  o.eval_every = 30;
  TANDEM_ASSERT_OK_AND_ASSIGN(FederatedResult avg, SimulateFederated(*model_, clients_, test_, o));
  o.algorithm = FederatedAlgorithm::kFedLuar;
  o.num_recycled = 1;
  TANDEM_ASSERT_OK_AND_ASSIGN(FederatedResult luar, SimulateFederated(*model_, clients_, test_, o));
  EXPECT_TRUE(luar.rounds[0].recycled.empty());
  int recycled_rounds = 0;
  for (const RoundMetrics& m : luar.rounds) {
    recycled_rounds += !m.recycled.empty();
    for (const std::string& name : m.recycled) EXPECT_THAT(name, ::testing::EndsWith(".weight"));
  }
  EXPECT_EQ(recycled_rounds, 29);
  std::printf("FedAvg acc %.4f bytes %lld | FedLUAR(R=1) acc %.4f bytes %lld (%.1f%%)\n",
              avg.final_accuracy, static_cast<long long>(avg.total_bytes), luar.final_accuracy,
              static_cast<long long>(luar.total_bytes), 100.0 * luar.total_bytes / avg.total_bytes);
  EXPECT_LT(luar.total_bytes, avg.total_bytes * 0.95);
  EXPECT_GT(luar.final_accuracy, avg.final_accuracy - 0.05);
  EXPECT_GT(luar.final_accuracy, 0.85);
}

TEST_F(FederatedSimTest, RejectsBadOptions) {
  FederatedOptions o;
  o.clients_per_round = 11;
  EXPECT_THAT(SimulateFederated(*model_, clients_, test_, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.clients_per_round = 2;
  o.rounds = 0;
  EXPECT_THAT(SimulateFederated(*model_, clients_, test_, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.rounds = 1;
  o.algorithm = FederatedAlgorithm::kFedLuar;
  o.num_recycled = 3;  // the MLP has 3 weight tensors: one must stay fresh
  EXPECT_THAT(SimulateFederated(*model_, clients_, test_, o), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
