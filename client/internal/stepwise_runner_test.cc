// Stepwise participant: outcomes, the assignment's public view, bad updates
// refused before anything is encoded or stored, the pending report resent
// (never a second one) after a failed upload, FedLUAR packing, one call at a
// time. The network is a scripted RoundTransport; python/tests drive the
// real daemons.
#include "client/internal/stepwise_runner.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "client/internal/scripted_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::StatusIs;

constexpr uint64_t kParams = 26;  // MLP 3 -> 4 -> 2 of Task()

class StepwiseRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name())
               .string();
    std::filesystem::remove_all(dir_);
    auto store = MakeFileStateStore(dir_);
    ASSERT_TRUE(store.ok());
    store_ = *std::move(store);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<StepwiseRunner> Make(bool with_store = true) {
    auto t = std::make_unique<ScriptedTransport>();
    transport_ = t.get();
    ParticipantOptions o;
    o.client_id = "c1";
    StepwiseEnvironment env{with_store ? store_.get() : nullptr, &clock_, random_.get()};
    auto r = StepwiseRunner::Create(o, env, std::move(t));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<StateStore> store_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> random_ = DeterministicRandom::FromSeed(7);
  ScriptedTransport* transport_ = nullptr;
};

TEST_F(StepwiseRunnerTest, OutcomesWithoutTask) {
  auto p = Make();
  transport_->check_in.set_outcome(proto::CheckInResponse::OUTCOME_RETRY_LATER);
  transport_->check_in.set_retry_after_ms(250);
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  EXPECT_EQ(r.outcome, CheckInOutcome::kNotSelected);
  EXPECT_EQ(r.retry_after_ms, 250);
  EXPECT_FALSE(r.assignment.has_value());
  transport_->check_in.set_outcome(proto::CheckInResponse::OUTCOME_DONE);
  TANDEM_ASSERT_OK_AND_ASSIGN(r, p->CheckIn());
  EXPECT_EQ(r.outcome, CheckInOutcome::kTaskDone);
  EXPECT_THAT(p->DownloadModel().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  const std::vector<float> update(kParams, 0.f);
  EXPECT_THAT(p->Upload(update, 1).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(StepwiseRunnerTest, AssignDownloadUpload) {
  auto p = Make();
  transport_->check_in = TicketedTask(4);
  transport_->model_blob = ModelBlob(kParams);
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  ASSERT_EQ(r.outcome, CheckInOutcome::kAssigned);
  const Assignment& a = *r.assignment;
  EXPECT_EQ(a.round_id, 4u);
  EXPECT_EQ(a.num_params, kParams);
  ASSERT_EQ(a.tensors.size(), 4u);
  EXPECT_EQ(a.tensors[0].shape, (std::vector<int64_t>{4, 3}));  // [out, in]
  EXPECT_EQ(a.tensors[1].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(a.tensors[2].offset, 16);
  EXPECT_TRUE(a.ticketed);
  EXPECT_FALSE(a.norm_proofs);
  EXPECT_DOUBLE_EQ(a.clip_l2_norm, 1.0);
  EXPECT_EQ(a.training.local_steps, 5u);
  proto::RoundParameters rp;
  ASSERT_TRUE(rp.ParseFromString(a.round_parameters));
  EXPECT_EQ(rp.dimension(), 32u);

  TANDEM_ASSERT_OK_AND_ASSIGN(auto current, p->CurrentAssignment());
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(current->round_id, 4u);
  TANDEM_ASSERT_OK_AND_ASSIGN(ModelDownload m, p->DownloadModel());
  EXPECT_EQ(m.values.size(), kParams);
  EXPECT_FLOAT_EQ(m.values[0], 0.1f);

  std::vector<float> update(kParams, 0.5f);  // norm 2.55: clipped to 1
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadResult u, p->Upload(update, 12));
  EXPECT_FALSE(u.resent);
  EXPECT_EQ(u.report_id, kTicketId);
  EXPECT_NEAR(u.clip_factor, 1.0 / std::sqrt(26 * 0.25), 1e-6);
  ASSERT_EQ(transport_->uploads.size(), 1u);
  EXPECT_TRUE(transport_->uploads[0].first.has_ticket());
  ASSERT_EQ(transport_->done.size(), 1u);
  EXPECT_EQ(transport_->done[0].num_examples(), 12u);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto pending, p->Pending());
  EXPECT_FALSE(pending.has_value());
  TANDEM_ASSERT_OK_AND_ASSIGN(current, p->CurrentAssignment());
  EXPECT_FALSE(current.has_value());
  // The assignment ended with its report.
  EXPECT_THAT(p->Upload(update, 12).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Issue 33: a federated evaluation assignment takes the app's counts (checked
// before anything is encoded), never an update; a training one the reverse.
TEST_F(StepwiseRunnerTest, AnEvaluationAssignmentTakesCountsNotAnUpdate) {
  auto p = Make();
  transport_->check_in = TicketedTask(5);
  proto::EvaluationConfig* e = transport_->check_in.mutable_evaluation();
  e->set_max_examples(10);
  e->set_loss_clip(4);
  e->set_num_classes(2);
  e->set_metrics_version(1);
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  ASSERT_EQ(r.outcome, CheckInOutcome::kAssigned);
  ASSERT_TRUE(r.assignment->evaluation.has_value());
  EXPECT_EQ(r.assignment->evaluation->max_examples, 10u);
  EXPECT_EQ(r.assignment->evaluation->num_classes, 2u);
  const std::vector<float> update(kParams, 0.f);
  EXPECT_THAT(p->Upload(update, 1).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EvaluationCounts counts;
  counts.examples = 11;  // above max_examples
  counts.correct = 3;
  counts.loss_sum = 2;
  counts.class_examples = {10, 1};
  counts.class_correct = {2, 1};
  EXPECT_THAT(p->UploadEvaluation(counts).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(transport_->uploads.empty());
  counts.examples = 4;
  counts.class_examples = {3, 1};
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadResult u, p->UploadEvaluation(counts));
  EXPECT_EQ(u.report_id, kTicketId);
  ASSERT_EQ(transport_->uploads.size(), 1u);
  ASSERT_EQ(transport_->done.size(), 1u);
  EXPECT_EQ(transport_->done[0].num_examples(), 4u);
  EXPECT_THAT(p->UploadEvaluation(counts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));  // the assignment ended

  transport_->check_in = TicketedTask(6);  // a training round refuses counts
  TANDEM_ASSERT_OK_AND_ASSIGN(r, p->CheckIn());
  EXPECT_FALSE(r.assignment->evaluation.has_value());
  EXPECT_THAT(p->UploadEvaluation(counts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(StepwiseRunnerTest, BadUpdatesLeaveThePendingReportIntact) {
  auto p = Make();
  transport_->check_in = TicketedTask(4);
  ASSERT_TRUE(p->CheckIn().ok());
  // The first upload fails after the report was encoded and stored.
  transport_->upload_status = absl::UnavailableError("aggregator down");
  std::vector<float> update(kParams, 0.01f);
  EXPECT_THAT(p->Upload(update, 1).status(), StatusIs(absl::StatusCode::kUnavailable));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> before, store_->Get(kPendingReportKey));
  ASSERT_TRUE(before.has_value());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto info, p->Pending());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->round_id, 4u);
  EXPECT_EQ(info->report_id, kTicketId);
  EXPECT_TRUE(info->stored);

  std::vector<float> short_update(kParams - 1, 0.f);
  EXPECT_THAT(p->Upload(short_update, 1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<float> nan_update(kParams, 0.f);
  nan_update[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(p->Upload(nan_update, 1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<float> inf_update(kParams, 0.f);
  inf_update[0] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(p->Upload(inf_update, 1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> after, store_->Get(kPendingReportKey));
  EXPECT_EQ(after, before);
  EXPECT_EQ(transport_->uploads.size(), 1u);  // nothing sent for a bad update

  // A good retry resends the same report, not a second one.
  transport_->upload_status = absl::OkStatus();
  std::vector<float> other(kParams, -0.02f);
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadResult u, p->Upload(other, 1));
  EXPECT_TRUE(u.resent);
  ASSERT_EQ(transport_->uploads.size(), 2u);
  EXPECT_EQ(transport_->uploads[1].first.SerializeAsString(),
            transport_->uploads[0].first.SerializeAsString());
  TANDEM_ASSERT_OK_AND_ASSIGN(after, store_->Get(kPendingReportKey));
  EXPECT_FALSE(after.has_value());
}

TEST_F(StepwiseRunnerTest, CheckInResendsAStoredReportAfterARestart) {
  {
    auto p = Make();
    transport_->check_in = TicketedTask(4);
    ASSERT_TRUE(p->CheckIn().ok());
    transport_->upload_status = absl::UnavailableError("down");
    std::vector<float> update(kParams, 0.01f);
    ASSERT_FALSE(p->Upload(update, 1).ok());
  }
  // A new process (same store): the same round is assigned again.
  auto p = Make();
  transport_->check_in = TicketedTask(4);
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  EXPECT_EQ(r.outcome, CheckInOutcome::kResent);
  EXPECT_GT(r.bytes_up, 0u);
  ASSERT_EQ(transport_->uploads.size(), 1u);
  EXPECT_EQ(transport_->uploads[0].first.report_id(), kTicketId);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> left, store_->Get(kPendingReportKey));
  EXPECT_FALSE(left.has_value());
}

TEST_F(StepwiseRunnerTest, OlderRoundsReportIsDropped) {
  {
    auto p = Make();
    transport_->check_in = TicketedTask(4);
    ASSERT_TRUE(p->CheckIn().ok());
    transport_->upload_status = absl::UnavailableError("down");
    std::vector<float> update(kParams, 0.01f);
    ASSERT_FALSE(p->Upload(update, 1).ok());
  }
  auto p = Make();
  transport_->check_in = TicketedTask(5, "ticket-id-round5");
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  EXPECT_EQ(r.outcome, CheckInOutcome::kAssigned);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> left, store_->Get(kPendingReportKey));
  EXPECT_FALSE(left.has_value());
}

TEST_F(StepwiseRunnerTest, WithoutStoreTheReportIsKeptInMemory) {
  auto p = Make(/*with_store=*/false);
  transport_->check_in = TicketedTask(4);
  ASSERT_TRUE(p->CheckIn().ok());
  transport_->upload_status = absl::UnavailableError("down");
  std::vector<float> update(kParams, 0.01f);
  ASSERT_FALSE(p->Upload(update, 1).ok());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto info, p->Pending());
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->stored);
  transport_->upload_status = absl::OkStatus();
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadResult u, p->Upload(update, 1));
  EXPECT_TRUE(u.resent);
  EXPECT_EQ(transport_->uploads[1].second.SerializeAsString(),
            transport_->uploads[0].second.SerializeAsString());
}

TEST_F(StepwiseRunnerTest, RecycledTensorsAreMarkedAndDropped) {
  auto p = Make();
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->add_recycled_layers(0);  // fc weight 4x3
  TANDEM_ASSERT_OK_AND_ASSIGN(CheckInResult r, p->CheckIn());
  ASSERT_TRUE(r.assignment.has_value());
  const std::vector<ModelTensor> tensors = r.assignment->tensors;
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_TRUE(tensors[0].recycled);
  EXPECT_FALSE(tensors[1].recycled);
  // Only the recycled tensor is large: the rest is within the clip bound.
  std::vector<float> update(kParams, 0.01f);
  for (int i = 0; i < 12; ++i) update[i] = 100.f;
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadResult u, p->Upload(update, 1));
  EXPECT_DOUBLE_EQ(u.clip_factor, 1.0);
}

TEST_F(StepwiseRunnerTest, RefusesUnsafeAssignments) {
  auto p = Make();
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_helper()->set_address("leader:1");  // both shares to one server
  EXPECT_THAT(p->CheckIn().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_round_parameters()->set_dimension(uint64_t{1} << 40);
  EXPECT_THAT(p->CheckIn().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(p->DownloadModel().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(StepwiseRunnerTest, CancelStopsLaterCalls) {
  auto p = Make();
  p->Cancel();
  EXPECT_TRUE(transport_->cancelled);
  EXPECT_THAT(p->CheckIn().status(), StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace tandem::client
