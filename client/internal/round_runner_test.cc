// Round runner: outcomes, validation, cancellation and the resend of a stored
// report. The network is a scripted RoundTransport (the runner's seam);
// tests/integration/coordinator_test.cc drives the real daemons.
#include "client/internal/round_runner.h"

#include <filesystem>

#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "client/internal/scripted_transport.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::StatusIs;

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

class RoundRunnerTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<RoundRunner>> Make(StateStore* store = nullptr,
                                                    ParticipantOptions o = {}) {
    auto t = std::make_unique<ScriptedTransport>();
    transport_ = t.get();
    Environment env{&data_, store, &clock_, random_.get()};
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

// Issue 34: the device's own key signs every check-in (the id is the key's)
// and, when the ticket names it, both uploads; the key survives a restart
// through the state store; a ticket naming another key is never signed for.
TEST_F(RoundRunnerTest, ChecksInAndUploadsAsItsOwnDeviceKey) {
  auto store = MakeFileStateStore(::testing::TempDir() + "/device_identity_store");
  ASSERT_TRUE(store.ok());
  (void)(*store)->Delete(kDeviceKeyKey);
  (void)(*store)->Delete("pending-report");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(store->get()));
  transport_->check_in = Task(4);
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK(r->ParticipateOnce().status());
  ASSERT_EQ(transport_->check_ins.size(), 1u);
  const proto::CheckInRequest first = transport_->check_ins[0];
  TANDEM_ASSERT_OK_AND_ASSIGN(crypto::Ed25519VerifyingKey key,
                              crypto::VerifyCheckIn(first, absl::ToUnixMillis(clock_.Now()), 1000));
  EXPECT_EQ(first.client_id(), crypto::DeviceId(key.Raw()));
  EXPECT_EQ(transport_->done[0].client_id(), first.client_id());  // not the app's label
  // The same device after a restart, now with a ticket bound to its key.
  (void)(*store)->Delete("pending-report");
  TANDEM_ASSERT_OK_AND_ASSIGN(r, Make(store->get()));
  transport_->check_in = Task(5);
  *transport_->check_in.mutable_ticket() = Ticket("t", 5, kTicketId, key.Raw());
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK(r->ParticipateOnce().status());
  ASSERT_EQ(transport_->check_ins.size(), 1u);
  EXPECT_EQ(transport_->check_ins[0].client_id(), first.client_id());
  ASSERT_EQ(transport_->uploads.size(), 1u);
  const auto& [a, b] = transport_->uploads[0];
  proto::UploadTicket t;
  ASSERT_TRUE(t.ParseFromString(a.ticket().ticket()));
  const std::string td = crypto::TicketDigest(a.ticket());
  TANDEM_EXPECT_OK(crypto::VerifyUploadSignature(
      t, crypto::UploadRole::kLeader, td,
      crypto::UploadContentDigest(a.key_share(), a.has_norm_proof() ? &a.norm_proof() : nullptr,
                                  td),
      a.device_signature()));
  TANDEM_EXPECT_OK(crypto::VerifyUploadSignature(
      t, crypto::UploadRole::kHelper, td,
      crypto::UploadContentDigest(b.key_share(), b.has_norm_proof() ? &b.norm_proof() : nullptr,
                                  td),
      b.device_signature()));
  // A ticket issued to another key: refused before anything is uploaded.
  (void)(*store)->Delete("pending-report");
  TANDEM_ASSERT_OK_AND_ASSIGN(r, Make(store->get()));
  transport_->check_in = Task(6);
  *transport_->check_in.mutable_ticket() = Ticket("t", 6, kTicketId, std::string(32, '\x42'));
  transport_->model_blob = ModelBlob(26);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(transport_->uploads.empty());
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
  // A stated example shape must multiply to cols, and match a native
  // model's input shape when both are known.
  LocalData shaped = *data_.Load();
  shaped.shape = {shaped.cols + 1};
  EXPECT_THAT(DatasetFromLocalData(shaped).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  shaped.shape = {1, 1, shaped.cols};
  auto as_image = DatasetFromLocalData(shaped);
  ASSERT_TRUE(as_image.ok()) << as_image.status();
  EXPECT_EQ(as_image->shape.width, shaped.cols);
  proto::ModelSpec image_model;
  for (int64_t d : {int64_t{1}, int64_t{1}, shaped.cols}) image_model.add_input_shape(d);
  EXPECT_THAT(CheckExampleShape(shaped, image_model), ::tandem::testing::IsOk());
  image_model.set_input_shape(1, 2);  // another image of other sides
  EXPECT_THAT(CheckExampleShape(shaped, image_model), StatusIs(absl::StatusCode::kInvalidArgument));
  shaped.shape.clear();  // no claim: taken as the model lays it out
  EXPECT_THAT(CheckExampleShape(shaped, image_model), ::tandem::testing::IsOk());
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

TEST_F(RoundRunnerTest, UploadsUnderTheTicketIdAndSendsTheTicketEverywhere) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->check_in = TicketedTask(4);
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult res, r->ParticipateOnce());
  EXPECT_EQ(res.outcome, RoundOutcome::kContributed);
  ASSERT_EQ(transport_->uploads.size(), 1u);
  const std::string want = transport_->check_in.ticket().SerializeAsString();
  const auto& [a, b] = transport_->uploads[0];
  EXPECT_EQ(a.report_id(), kTicketId);
  EXPECT_EQ(b.report_id(), kTicketId);
  EXPECT_EQ(a.ticket().SerializeAsString(), want);
  EXPECT_EQ(b.ticket().SerializeAsString(), want);
  ASSERT_EQ(transport_->done.size(), 1u);
  EXPECT_EQ(transport_->done[0].report_id(), kTicketId);
  EXPECT_EQ(transport_->done[0].ticket().SerializeAsString(), want);
}

TEST_F(RoundRunnerTest, AStoredReportIsResentWithItsOwnTicket) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "round_runner_ticket_state";
  std::filesystem::remove_all(dir);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, MakeFileStateStore(dir.string()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(store.get()));
  transport_->check_in = TicketedTask(7);
  const std::string first_ticket = transport_->check_in.ticket().SerializeAsString();
  transport_->model_blob = ModelBlob(26);
  transport_->upload_status = absl::UnavailableError("leader down");
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_EQ(transport_->uploads.size(), 1u);
  const std::string a0 = transport_->uploads[0].first.SerializeAsString();
  const std::string b0 = transport_->uploads[0].second.SerializeAsString();
  // The app "crashes": a fresh runner over the same store checks in again
  // and gets a re-issued ticket for the same round.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto again, Make(store.get()));
  transport_->check_in = TicketedTask(7, "another-ticket16");
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult res, again->ParticipateOnce());
  EXPECT_TRUE(res.resent);
  EXPECT_EQ(transport_->downloads, 0);  // no second training
  ASSERT_EQ(transport_->uploads.size(), 1u);
  EXPECT_EQ(transport_->uploads[0].first.SerializeAsString(), a0);  // byte for byte
  EXPECT_EQ(transport_->uploads[0].second.SerializeAsString(), b0);
  EXPECT_EQ(transport_->uploads[0].first.ticket().SerializeAsString(), first_ticket);
  ASSERT_EQ(transport_->done.size(), 1u);
  EXPECT_EQ(transport_->done[0].report_id(), kTicketId);
  EXPECT_EQ(transport_->done[0].ticket().SerializeAsString(), first_ticket);
}

TEST_F(RoundRunnerTest, BadTicketsAreRefusedBeforeTrainingOrUploading) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->model_blob = ModelBlob(26);
  transport_->check_in = TicketedTask(4, "short-id");
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_ticket()->set_ticket("\xff\xff not a ticket");
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->check_in = TicketedTask(4);
  *transport_->check_in.mutable_ticket() = Ticket("t", 5, kTicketId);  // another round
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("round 5")));
  *transport_->check_in.mutable_ticket() = Ticket("other", 4, kTicketId);  // another task
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(transport_->downloads, 0);
  EXPECT_TRUE(transport_->uploads.empty());
  EXPECT_TRUE(transport_->done.empty());
}

ParticipantOptions Pinned() {
  ParticipantOptions o;
  o.leader_address = "leader:1";
  o.leader_name = "leader.tandem";
  o.helper_address = "helper:1";
  o.helper_name = "helper.tandem";
  return o;
}

TEST_F(RoundRunnerTest, PinnedAggregatorsAreUsedWithTheirTlsNames) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(nullptr, Pinned()));
  transport_->check_in = TicketedTask(4);
  transport_->model_blob = ModelBlob(26);
  TANDEM_ASSERT_OK(r->ParticipateOnce().status());
  ASSERT_EQ(transport_->endpoints.size(), 1u);
  EXPECT_EQ(transport_->endpoints[0].first.address(), "leader:1");
  EXPECT_EQ(transport_->endpoints[0].first.server_name(), "leader.tandem");
  EXPECT_EQ(transport_->endpoints[0].second.address(), "helper:1");
  EXPECT_EQ(transport_->endpoints[0].second.server_name(), "helper.tandem");
}

TEST_F(RoundRunnerTest, ACheckInNamingOtherAggregatorsThanThePinnedIsRefused) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(nullptr, Pinned()));
  transport_->model_blob = ModelBlob(26);
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_helper()->set_address("mallory:1");
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("mallory:1")));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_leader()->set_server_name("mallory.tandem");
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("identity")));
  EXPECT_EQ(transport_->downloads, 0);
  EXPECT_TRUE(transport_->uploads.empty());
}

TEST_F(RoundRunnerTest, OneServerForBothRolesIsRefusedPinnedOrNot) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());  // no pins
  transport_->model_blob = ModelBlob(26);
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_helper()->set_address("LEADER:1");
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("both")));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_leader()->set_server_name("agg.tandem");
  transport_->check_in.mutable_helper()->set_server_name("agg.tandem");
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(transport_->downloads, 0);
  EXPECT_TRUE(transport_->uploads.empty());
  // Pins that name one server twice are refused at creation.
  ParticipantOptions same = Pinned();
  same.helper_address = "localhost:5";
  same.leader_address = "127.0.0.1:5";
  EXPECT_THAT(Make(nullptr, same).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  ParticipantOptions half;
  half.leader_address = "leader:1";
  EXPECT_THAT(Make(nullptr, half).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RoundRunnerTest, OversizedAssignmentsAreRefusedBeforeDownloadOrAllocation) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->model_blob = ModelBlob(26);
  // D = 4096 groups x 2^20 blocks x 2^10: 2^42 coordinates (32 TiB encoded).
  transport_->check_in = TicketedTask(4);
  proto::RoundParameters* rp = transport_->check_in.mutable_round_parameters();
  rp->set_dimension(uint64_t{1} << 42);
  rp->set_num_groups(4096);
  rp->mutable_group_parameters()->set_log_num_blocks(20);
  rp->mutable_group_parameters()->set_block_size(1024);
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("max_dimension")));
  // A product that does not match D.
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_round_parameters()->set_dimension(64);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // A model too large for max_model_bytes (2^24 x 2^24 weights), absurd
  // training settings and out-of-range recycled layers.
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->mutable_model()->set_hidden(0, int64_t{1} << 24);
  transport_->check_in.mutable_training()->mutable_model()->add_hidden(int64_t{1} << 24);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      ::testing::HasSubstr("max_model_bytes")));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->set_local_steps(4000000000u);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->set_batch_size(1u << 30);
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->set_learning_rate(std::nan(""));
  EXPECT_THAT(r->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument));
  transport_->check_in = TicketedTask(4);
  transport_->check_in.mutable_training()->add_recycled_layers(4);  // the MLP has 4 tensors
  EXPECT_THAT(r->ParticipateOnce().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("recycled")));
  EXPECT_EQ(transport_->downloads, 0);
  // A downloaded model over max_model_bytes is refused as such.
  ParticipantOptions small;
  small.max_model_bytes = 128;  // the 26-parameter model needs 104 bytes of values
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r2, Make(nullptr, small));
  transport_->check_in = TicketedTask(4);
  transport_->model_blob = ModelBlob(26) + std::string(100, '\0');
  EXPECT_THAT(r2->ParticipateOnce().status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                       ::testing::HasSubstr("max_model_bytes")));
  EXPECT_TRUE(transport_->uploads.empty());
}

TEST_F(RoundRunnerTest, RetryAfterIsClamped) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make());
  transport_->check_in.set_outcome(proto::CheckInResponse::OUTCOME_RETRY_LATER);
  transport_->check_in.set_retry_after_ms(int64_t{1} << 62);
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult wait, r->ParticipateOnce());
  EXPECT_EQ(wait.retry_after_ms, kMaxRetryAfterMs);
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

TEST_F(RoundRunnerTest, TopNormRoundsKeepTheUnsentResidualInTheStore) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "round_runner_ef";
  for (const bool feedback : {true, false}) {
    for (const auto sel : {proto::BLOCK_SELECTION_RANDOM, proto::BLOCK_SELECTION_TOP_NORM}) {
      std::filesystem::remove_all(dir);
      TANDEM_ASSERT_OK_AND_ASSIGN(auto store, MakeFileStateStore(dir.string()));
      ParticipantOptions o;
      o.error_feedback = feedback;
      TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Make(store.get(), o));
      transport_->check_in = Task(7);
      transport_->check_in.mutable_round_parameters()->set_block_selection(sel);
      transport_->model_blob = ModelBlob(26);
      TANDEM_ASSERT_OK_AND_ASSIGN(RoundResult res, r->ParticipateOnce());
      EXPECT_EQ(res.outcome, RoundOutcome::kContributed);
      TANDEM_ASSERT_OK_AND_ASSIGN(auto blob, store->Get(kErrorFeedbackKey));
      ASSERT_EQ(blob.has_value(), feedback && sel == proto::BLOCK_SELECTION_TOP_NORM);
      if (!blob.has_value()) continue;
      TANDEM_ASSERT_OK_AND_ASSIGN(ErrorFeedback ef, ErrorFeedback::Parse(*blob));
      EXPECT_EQ(ef.task_id(), "t");
      ASSERT_EQ(ef.residual().size(), 26u);  // the packed update, unpadded
      // D = 32: 2 groups of 2 blocks of 8. One block per group was sent (its
      // residual is zero); the other holds the trained update.
      int zero_blocks = 0, nonzero = 0;
      for (int blk = 0; blk < 4; ++blk) {
        bool all_zero = true;
        for (int i = blk * 8; i < std::min(26, blk * 8 + 8); ++i) all_zero &= ef.residual()[i] == 0;
        zero_blocks += all_zero;
      }
      for (float x : ef.residual()) nonzero += x != 0;
      EXPECT_EQ(zero_blocks, 2);
      EXPECT_GT(nonzero, 0);
    }
  }
}

}  // namespace
}  // namespace tandem::client
