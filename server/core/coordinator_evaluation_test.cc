// The coordinator's federated evaluation rounds (coordinator_evaluation.cc)
// on its state machine: after each release, one round with the metrics
// vector's parameters; its release recorded beside the round and charged
// once, also across a restart in the middle of it. And opaque models
// (issue 33): named tensors the coordinator releases without running them.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <thread>

#include "crypto/dp/accountant.h"
#include "gmock/gmock.h"
#include "ml/model/safetensors.h"
#include "server/core/coordinator_test_fixture.h"

namespace tandem::server {
namespace {

TEST_F(CoordinatorTest, AnEvaluationRoundFollowsEachReleaseAndResumesChargedOnce) {
  CoordinatorOptions o = Options();
  o.rounds = 1;
  o.evaluation.every = 1;
  o.evaluation.max_examples = 16;
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
    TickUntil(*c, "collecting");
    for (const char* id : {"a", "b"}) {
      TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
      TANDEM_ASSERT_OK(c->UploadDone(Done(id, 1)));
    }
    clock_.Advance(absl::Seconds(11));
    leader_.accepted = helper_.accepted = 2;
    TANDEM_ASSERT_OK(c->Tick());
    ASSERT_EQ(c->Status().completed_rounds(), 1u);
    // The last training round is released; its evaluation comes before done.
    TickUntil(*c, "collecting");
    const proto::RoundParameters& p = leader_.opened.back();
    EXPECT_EQ(p.round_id(), 2u);
    EXPECT_EQ(p.dimension(), MetricsDimension(2));  // 3 + 2 classes x 2
    EXPECT_EQ(p.group_parameters().log_num_blocks(), 0u);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In("a")));
    ASSERT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_TASK);
    EXPECT_TRUE(r.has_evaluation());
    EXPECT_EQ(r.evaluation().max_examples(), 16u);
    EXPECT_EQ(r.model_version(), 1u);  // the version to evaluate, downloadable
    TANDEM_ASSERT_OK(c->ModelBlob("t1", 1).status());
    TANDEM_ASSERT_OK(c->UploadDone(Done("a", 2)));
  }  // "crash" mid-evaluation
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  EXPECT_EQ(c->Status().aggregation_round(), 2u);  // the same round, re-opened
  EXPECT_EQ(leader_.opened.back().SerializeAsString(), leader_.opened[1].SerializeAsString());
  TANDEM_ASSERT_OK(CheckIn(*c, In("b")).status());
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 2)));
  clock_.Advance(absl::Seconds(11));
  leader_.share_value = uint64_t{1} << 12;  // 1/16 in every metric: 1 example of m = 16
  TANDEM_ASSERT_OK(c->Tick());
  const proto::CoordinatorStatusResponse s = c->Status();
  ASSERT_EQ(s.history_size(), 2);
  const proto::RoundSummary& e = s.history(1);
  ASSERT_TRUE(e.has_evaluation());
  EXPECT_EQ(e.model_version(), 1u);
  EXPECT_EQ(e.evaluation().reports(), 2u);
  EXPECT_NEAR(e.evaluation().examples(), 1.0, 1e-6);
  EXPECT_NEAR(e.evaluation().loss_sum(), 10.0, 1e-5);  // 1/16 of m L = 160
  EXPECT_GT(e.evaluation().count_stddev(), 0);
  EXPECT_EQ(s.last_evaluation().model_version(), 1u);
  // Two releases at q = 1, z = 1 (the private defaults): the training round
  // and the evaluation, the latter charged once despite the restart.
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const dp::PrivacySpent two,
      dp::ComputeEpsilon(1.0, 1.0, 2, 1e-5, dp::DefaultOrders(), dp::EpsilonConversion::kImproved));
  EXPECT_NEAR(e.epsilon(), two.epsilon, 1e-9);
  EXPECT_NEAR(s.epsilon_spent(), two.epsilon, 1e-9);
  TickUntil(*c, "done");
}

// Issue 33: any model. The coordinator aggregates and releases named
// tensors it cannot run (none of its own evaluation), and keeps every
// release as safetensors under those names.
TEST_F(CoordinatorTest, AnOpaqueModelIsReleasedUnderItsOwnNames) {
  CoordinatorOptions o = Options();
  o.model.Clear();
  proto::TensorSpec* w = o.model.add_tensors();
  w->set_name("features.0.weight");
  w->add_shape(2);
  w->add_shape(3);
  proto::TensorSpec* b = o.model.add_tensors();
  b->set_name("features.0.bias");
  b->add_shape(2);
  o.rounds = 1;
  o.models_dir = (dir_ / "models").string();
  EXPECT_THAT(Make(o).status(), ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  o.initial_params = {1, 2, 3, 4, 5, 6, 7, 8};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In("a")));
  ASSERT_EQ(r.training().model().tensors_size(), 2);
  EXPECT_EQ(r.training().model().tensors(0).name(), "features.0.weight");
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  TANDEM_ASSERT_OK(CheckIn(*c, In("b")).status());
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 1)));
  clock_.Advance(absl::Seconds(11));
  leader_.accepted = helper_.accepted = 2;
  // Whoever sees the version released finds its file (it was once written
  // after the status moved: an export of the latest version in that window
  // returned the previous one). A reader polls the status during the release.
  std::atomic<bool> stop{false}, file_missing{false};
  std::thread reader([&] {
    while (!stop.load()) {
      if (c->Status().completed_rounds() >= 1 &&
          !std::filesystem::exists(dir_ / "models" / "v1.safetensors")) {
        file_missing = true;
      }
    }
  });
  TANDEM_ASSERT_OK(c->Tick());
  stop = true;
  reader.join();
  EXPECT_FALSE(file_missing.load()) << "version 1 was shown before its file existed";
  const proto::CoordinatorStatusResponse s = c->Status();
  ASSERT_EQ(s.history_size(), 1);
  EXPECT_EQ(s.history(0).evaluated_by(), "none");
  auto file = ml::ReadSafetensorsFile((dir_ / "models" / "v1.safetensors").string());
  ASSERT_THAT(file, ::tandem::testing::IsOk());
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors[1].name, "features.0.bias");
  EXPECT_EQ(file->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  // A zero aggregate: the released version is the initial weights.
  EXPECT_EQ(*ml::AsFloat32(file->tensors[1]), (std::vector<float>{7, 8}));
}

TEST_F(CoordinatorTest, EvaluationOptionsAreValidated) {
  CoordinatorOptions o = Options();
  o.evaluation.every = 1;
  o.evaluation.noise_multiplier = 0;  // training rounds are noised: refused
  EXPECT_THAT(Make(o).status(), ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  o.evaluation.noise_multiplier = 1;
  o.evaluation.max_examples = 0;
  EXPECT_THAT(Make(o).status(), ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::server
