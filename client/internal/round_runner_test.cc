// Round runner: outcomes, validation, cancellation and the resend of a stored
// report. The network is a scripted RoundTransport (the runner's seam);
// tests/integration/coordinator_test.cc drives the real daemons.
#include "client/internal/round_runner.h"

#include <filesystem>

#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::StatusIs;

class ScriptedTransport : public RoundTransport {
 public:
  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& r) override {
    last_client = r.client_id();
    return check_in;
  }
  absl::StatusOr<std::string> DownloadModel(const proto::DownloadModelRequest&) override {
    ++downloads;
    return model_blob;
  }
  absl::Status UploadDone(const proto::UploadDoneRequest& r) override {
    done.push_back(r);
    return absl::OkStatus();
  }
  absl::Status Upload(const proto::Endpoint&, const proto::Endpoint&,
                      const proto::UploadRequest& a, const proto::UploadRequest& b) override {
    uploads.push_back({a, b});
    return upload_status;
  }
  void Cancel() override { cancelled = true; }

  proto::CheckInResponse check_in;
  std::string model_blob;
  absl::Status upload_status;
  std::string last_client;
  int downloads = 0;
  bool cancelled = false;
  std::vector<proto::UploadDoneRequest> done;
  std::vector<std::pair<proto::UploadRequest, proto::UploadRequest>> uploads;
};

class FixedData : public DataSource {
 public:
  absl::StatusOr<LocalData> Load() override {
    LocalData d;
    d.rows = 20;
    d.cols = 3;
    d.num_classes = 2;
    for (int i = 0; i < 20; ++i) {
      d.features.insert(d.features.end(), {float(i % 2), 0.5f, float(i) / 20});
      d.labels.push_back(i % 2);
    }
    return d;
  }
};

// An assignment for an MLP 3 -> 4 -> 2 (26 parameters), D = 2 groups x 2
// blocks x 8 = 32.
proto::CheckInResponse Task(uint64_t round) {
  proto::CheckInResponse t;
  t.set_outcome(proto::CheckInResponse::OUTCOME_TASK);
  t.set_task_id("t");
  t.set_round_id(round);
  proto::RoundParameters* rp = t.mutable_round_parameters();
  rp->set_task_id("t");
  rp->set_round_id(round);
  rp->set_dimension(32);
  rp->set_num_groups(2);
  rp->mutable_group_parameters()->set_log_num_blocks(1);
  rp->mutable_group_parameters()->set_block_size(8);
  rp->set_max_reports(10);
  rp->mutable_fixed_point()->set_fractional_bits(16);
  rp->mutable_fixed_point()->set_clip_l2_norm(1.0);
  proto::TrainingConfig* tc = t.mutable_training();
  tc->mutable_model()->set_input_dim(3);
  tc->mutable_model()->add_hidden(4);
  tc->mutable_model()->set_num_classes(2);
  tc->set_local_steps(5);
  tc->set_batch_size(4);
  tc->set_learning_rate(0.1);
  t.mutable_leader()->set_address("leader:1");
  t.mutable_helper()->set_address("helper:1");
  return t;
}

std::string ModelBlob(size_t n) {
  proto::Model m;
  proto::Tensor* t = m.add_layers();
  t->set_dtype(proto::DTYPE_FLOAT32);
  t->add_shape(static_cast<int64_t>(n));
  std::vector<float> p(n, 0.1f);
  t->set_data(std::string(reinterpret_cast<const char*>(p.data()), n * 4));
  return m.SerializeAsString();
}

class RoundRunnerTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<RoundRunner>> Make(StateStore* store = nullptr) {
    auto t = std::make_unique<ScriptedTransport>();
    transport_ = t.get();
    Environment env{&data_, store, &clock_, random_.get()};
    ParticipantOptions o;
    o.client_id = "c1";
    o.seed = 3;
    return RoundRunner::Create(o, env, std::move(t));
  }
  FixedData data_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> random_ = DeterministicRandom::FromSeed(11);
  ScriptedTransport* transport_ = nullptr;
};

TEST_F(RoundRunnerTest, ContributesOneReportAndReportsItDone) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->check_in = Task(4);
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult res, r->ParticipateOnce());
  EXPECT_EQ(res.outcome, RoundOutcome::kContributed);
  EXPECT_EQ(res.round_id, 4u);
  EXPECT_EQ(res.examples, 20u);
  ASSERT_EQ(transport_->uploads.size(), 1u);
  const auto& [a, b] = transport_->uploads[0];
  EXPECT_EQ(a.report_id(), b.report_id());
  EXPECT_EQ(a.report_id().size(), 16u);
  EXPECT_EQ(a.key_share().keys_size(), 2);  // one key per group
  ASSERT_EQ(transport_->done.size(), 1u);
  EXPECT_EQ(transport_->done[0].report_id(), a.report_id());
  EXPECT_EQ(transport_->done[0].bytes_uploaded(), a.ByteSizeLong() + b.ByteSizeLong());
}

TEST_F(RoundRunnerTest, OutcomesAndBadInputs) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->check_in.set_outcome(proto::CheckInResponse::OUTCOME_RETRY_LATER);
  transport_->check_in.set_retry_after_ms(250);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult wait, r->ParticipateOnce());
  EXPECT_EQ(wait.outcome, RoundOutcome::kNotSelected);
  EXPECT_EQ(wait.retry_after_ms, 250);
  transport_->check_in.set_outcome(proto::CheckInResponse::OUTCOME_DONE);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult done, r->ParticipateOnce());
  EXPECT_EQ(done.outcome, RoundOutcome::kTaskDone);
  // A model of the wrong size, then a truncated blob: nothing is uploaded.
  transport_->check_in = Task(1);
  transport_->model_blob = ModelBlob(25);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->model_blob = ModelBlob(26).substr(0, 40);
  EXPECT_FALSE(r->ParticipateOnce().ok());
  EXPECT_TRUE(transport_->uploads.empty());
  // Options and data are validated.
  Environment env{&data_, nullptr, &clock_, random_.get()};
  ParticipantOptions bad;
  bad.client_id = "has space";
  EXPECT_THAT(RoundRunner::Create(bad, env, std::make_unique<ScriptedTransport>()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  LocalData ragged = *data_.Load();
  ragged.labels.pop_back();
  EXPECT_THAT(DatasetFromLocalData(ragged).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  LocalData nan = *data_.Load();
  nan.features[5] = std::nanf("");
  EXPECT_THAT(DatasetFromLocalData(nan).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // Cancel: the transport is cancelled and the next call refuses.
  r->Cancel();
  EXPECT_TRUE(transport_->cancelled);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(RoundRunnerTest, AFailedUploadIsResentAsTheSameReportWithoutRetraining) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "round_runner_state";
  std::filesystem::remove_all(dir);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, MakeFileStateStore(dir.string()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(store.get()));
  transport_->check_in = Task(7);
  transport_->model_blob = ModelBlob(26);
  transport_->upload_status = absl::UnavailableError("helper down");
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_EQ(transport_->uploads.size(), 1u);
  const std::string first = transport_->uploads[0].first.SerializeAsString();
  transport_->upload_status = absl::OkStatus();
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult again, r->ParticipateOnce());
  EXPECT_TRUE(again.resent);
  EXPECT_EQ(transport_->downloads, 1);  // no second training
  ASSERT_EQ(transport_->uploads.size(), 2u);
  EXPECT_EQ(transport_->uploads[1].first.SerializeAsString(), first);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto left, store->Get("pending-report"));
  EXPECT_FALSE(left.has_value());  // delivered: forgotten
  // A later round trains afresh.
  transport_->check_in = Task(8);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult next, r->ParticipateOnce());
  EXPECT_FALSE(next.resent);
  EXPECT_EQ(transport_->downloads, 2);
  EXPECT_NE(transport_->uploads[2].first.report_id(), transport_->uploads[0].first.report_id());
}

TEST(FileStateStore, PutGetDeleteAndKeyValidation) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "file_state_store";
  std::filesystem::remove_all(dir);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, MakeFileStateStore(dir.string()));
  const std::string bin("a\0b\xff", 4);
  TANDEM_ASSERT_OK(s->Put("k", bin));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto v, s->Get("k"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, bin);
  TANDEM_ASSERT_OK(s->Put("k", "new"));
  EXPECT_EQ(**s->Get("k"), "new");
  TANDEM_ASSERT_OK(s->Delete("k"));
  TANDEM_ASSERT_OK(s->Delete("k"));  // idempotent
  EXPECT_FALSE(s->Get("k")->has_value());
  EXPECT_THAT(s->Put("../escape", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::client
