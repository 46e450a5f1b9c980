// Coordinator core: round state machine, sampling, validation, restart.
// The aggregators are a scripted AggregatorClient here (the state machine's
// view of them); tests/integration/coordinator_test.cc runs the real daemons.
#include "server/core/coordinator.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/core/coordinator_test_fixture.h"
#include "server/testing/scripted_aggregator.h"
#include "server/testing/test_devices.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Pair;

TEST_F(CoordinatorTest, RoundReleasesAtTheDeadlineWithTheUploadsItHas) {
  // The leader's clock runs 7 s ahead, the helper says nothing of its own.
  leader_.open_response.set_now_unix_ms(absl::ToUnixMillis(clock_.Now() + absl::Seconds(7)));
  leader_.open_response.set_max_clock_skew_ms(300000);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  EXPECT_EQ(c->Status().phase(), "idle");
  EXPECT_TRUE(c->Status().aggregator_clock_offset_ms().empty());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto early, CheckIn(*c, In("a")));
  EXPECT_EQ(early.outcome(), proto::CheckInResponse::OUTCOME_RETRY_LATER);
  TickUntil(*c, "collecting");
  EXPECT_THAT(c->Status().aggregator_clock_offset_ms(), ElementsAre(Pair("leader", 7000)));
  EXPECT_THAT(c->Metrics().status.aggregator_clock_offset_ms(), ElementsAre(Pair("leader", 7000)));
  ASSERT_EQ(leader_.opened.size(), 1u);
  ASSERT_EQ(helper_.opened.size(), 1u);
  EXPECT_EQ(leader_.opened[0].SerializeAsString(), helper_.opened[0].SerializeAsString());
  EXPECT_EQ(leader_.opened[0].task_id(), "t1");

  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, CheckIn(*c, In("a")));
  ASSERT_EQ(a.outcome(), proto::CheckInResponse::OUTCOME_TASK);
  EXPECT_EQ(a.round_id(), 1u);
  EXPECT_EQ(a.model_version(), 0u);
  EXPECT_EQ(a.round_parameters().SerializeAsString(), leader_.opened[0].SerializeAsString());
  EXPECT_EQ(a.training().model().input_dim(), 4);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto again, CheckIn(*c, In("a")));
  EXPECT_EQ(again.SerializeAsString(), a.SerializeAsString());  // same assignment
  TANDEM_ASSERT_OK(CheckIn(*c, In("b")).status());
  TANDEM_ASSERT_OK(CheckIn(*c, In("straggler")).status());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto blob, c->ModelBlob("t1", 0));
  proto::Model m;
  ASSERT_TRUE(m.ParseFromString(*blob));
  EXPECT_EQ(m.layers(0).data().size(), (4 * 3 + 3 + 3 * 2 + 2) * sizeof(float));

  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 1)));
  TANDEM_ASSERT_OK(c->Tick());
  EXPECT_EQ(c->Status().phase(), "collecting");  // waits for the deadline
  EXPECT_TRUE(leader_.finalized.empty());
  clock_.Advance(absl::Seconds(11));
  leader_.accepted = helper_.accepted = 2;
  TANDEM_ASSERT_OK(c->Tick());
  const proto::CoordinatorStatusResponse s = c->Status();
  EXPECT_EQ(s.completed_rounds(), 1u);
  ASSERT_EQ(s.history_size(), 1);
  EXPECT_EQ(s.history(0).assigned(), 3u);
  EXPECT_EQ(s.history(0).uploads_done(), 2u);
  EXPECT_EQ(s.history(0).accepted_reports(), 2u);
  EXPECT_EQ(s.history(0).bytes_up(), 2000u);
  // The summary is the same status without the history.
  proto::CoordinatorStatusResponse summary = c->StatusSummary();
  EXPECT_EQ(summary.history_size(), 0);
  summary.mutable_history()->CopyFrom(s.history());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(summary, s));
  EXPECT_THAT(c->ModelBlob("t1", 0).status(), StatusIs(absl::StatusCode::kNotFound));
  TANDEM_EXPECT_OK(c->ModelBlob("t1", 1).status());
  // The straggler's late report is refused; a second round follows.
  EXPECT_THAT(c->UploadDone(Done("straggler", 1)), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(c->Metrics().status.completed_rounds(), 1u);
  EXPECT_EQ(c->Metrics().last_round_accepted_reports, 2u);
}

TEST_F(CoordinatorTest, MissedQuorumAbandonsAndTargetClosesEarly) {
  CoordinatorOptions o = Options();
  o.target_reports = 3;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  TANDEM_ASSERT_OK(CheckIn(*c, In("a")).status());
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  clock_.Advance(absl::Seconds(11));
  TANDEM_ASSERT_OK(c->Tick());  // 1 < min_reports = 2
  EXPECT_TRUE(leader_.finalized.empty());
  EXPECT_EQ(c->Status().completed_rounds(), 0u);
  TickUntil(*c, "collecting");
  EXPECT_EQ(c->Status().aggregation_round(), 2u);  // a fresh id on the aggregators
  for (const char* id : {"a", "b", "c"}) {
    TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
    TANDEM_ASSERT_OK(c->UploadDone(Done(id, 2)));
  }
  leader_.accepted = helper_.accepted = 3;
  TANDEM_ASSERT_OK(c->Tick());  // target reached before the deadline
  EXPECT_EQ(c->Status().completed_rounds(), 1u);
  EXPECT_EQ(c->Metrics().rounds_abandoned, 1u);
}

TEST_F(CoordinatorTest, EnrollmentWindowClosesAssignmentAndTheRoundOnceAllUploaded) {
  CoordinatorOptions o = Options();
  o.enrollment_window = absl::Seconds(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  for (const char* id : {"a", "b"}) TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
  clock_.Advance(absl::Seconds(3));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto late, CheckIn(*c, In("late")));
  EXPECT_EQ(late.outcome(), proto::CheckInResponse::OUTCOME_RETRY_LATER);
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  TANDEM_ASSERT_OK(c->Tick());
  EXPECT_EQ(c->Status().completed_rounds(), 0u);  // b is still training
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 1)));
  leader_.accepted = helper_.accepted = 2;
  TANDEM_ASSERT_OK(c->Tick());  // all assigned are in: no wait for the deadline
  EXPECT_EQ(c->Status().completed_rounds(), 1u);
  EXPECT_EQ(c->Status().history(0).assigned(), 2u);
  o.enrollment_window = absl::Seconds(10);  // not shorter than the round
  EXPECT_THAT(Make(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(CoordinatorTest, MalformedAndOutOfPlaceRequestsGetClearErrors) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  TickUntil(*c, "collecting");
  // Check-ins that do not prove the device key: refused before any state.
  for (const std::string& bad_id :
       {std::string(), std::string("bad id!"), std::string(65, 'a'), Id("b")}) {
    proto::CheckInRequest forged = In("a");
    forged.set_client_id(bad_id);
    EXPECT_THAT(CheckIn(*c, forged).status(), StatusIs(absl::StatusCode::kUnauthenticated));
  }
  proto::CheckInRequest unsigned_request;
  unsigned_request.set_client_id(Id("a"));
  EXPECT_THAT(CheckIn(*c, unsigned_request).status(), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(c->Status().assigned(), 0u);
  const proto::CheckInRequest other =
      testing::SignedCheckIn("a", absl::ToUnixMillis(clock_.Now()), "nope");
  EXPECT_THAT(c->CheckIn(other).status(), StatusIs(absl::StatusCode::kNotFound));
  TANDEM_ASSERT_OK(CheckIn(*c, In("a")).status());
  proto::UploadDoneRequest short_id = Done("a", 1);
  short_id.set_report_id("short");
  EXPECT_THAT(c->UploadDone(short_id), StatusIs(absl::StatusCode::kInvalidArgument));
  // a's ticket is for round 1, and a client never assigned has none.
  EXPECT_THAT(c->UploadDone(Done("a", 9)), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(c->UploadDone(Done("never-assigned", 1)),
              StatusIs(absl::StatusCode::kUnauthenticated));
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));  // an idempotent retry
  // Another report id than the ticket's: not this ticket's report.
  EXPECT_THAT(c->UploadDone(Done("a", 1, 'z')), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(c->ModelBlob("t1", 5).status(), StatusIs(absl::StatusCode::kNotFound));
  // A done client waits for the next round.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In("a")));
  EXPECT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_RETRY_LATER);
}

TEST_F(CoordinatorTest, SamplingIsPoissonWithRateQAndStable) {
  CoordinatorOptions o = Options();
  o.task.sample_rate = 0.3;
  o.task.secure_sum.max_reports = 5000;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  int assigned = 0;
  constexpr int kClients = 3000;
  for (int i = 0; i < kClients; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In(absl::StrCat("c", i))));
    TANDEM_ASSERT_OK_AND_ASSIGN(auto again, CheckIn(*c, In(absl::StrCat("c", i))));
    EXPECT_EQ(r.outcome(), again.outcome());  // no re-rolling
    assigned += r.outcome() == proto::CheckInResponse::OUTCOME_TASK;
  }
  // Binomial(3000, 0.3): sd = 25; 5 sd either side.
  EXPECT_NEAR(assigned, 900, 125);
}

TEST_F(CoordinatorTest, RestartResumesTheOpenRoundFromTheCheckpoint) {
  std::string blob_v1;
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
    TickUntil(*c, "collecting");
    for (const char* id : {"a", "b"}) {
      TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
      TANDEM_ASSERT_OK(c->UploadDone(Done(id, 1)));
    }
    clock_.Advance(absl::Seconds(11));
    leader_.accepted = helper_.accepted = 2;
    leader_.share_value = 1 << 12;  // a non-zero mean update: the params move
    TANDEM_ASSERT_OK(c->Tick());
    ASSERT_EQ(c->Status().completed_rounds(), 1u);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto b, c->ModelBlob("t1", 1));
    blob_v1 = *b;
    TickUntil(*c, "collecting");
    TANDEM_ASSERT_OK(CheckIn(*c, In("a")).status());
    TANDEM_ASSERT_OK(CheckIn(*c, In("b")).status());
    TANDEM_ASSERT_OK(c->UploadDone(Done("a", 2)));
  }  // "crash"
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  EXPECT_EQ(c->Status().completed_rounds(), 1u);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, c->ModelBlob("t1", 1));
  EXPECT_EQ(*b, blob_v1);
  TickUntil(*c, "collecting");
  EXPECT_EQ(c->Status().aggregation_round(), 2u);  // same round, re-opened
  EXPECT_EQ(leader_.opened.back().SerializeAsString(), leader_.opened[1].SerializeAsString());
  EXPECT_EQ(c->Status().assigned(), 2u);
  EXPECT_EQ(c->Status().uploads_done(), 1u);
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 2)));  // remembered: a retry
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 2)));
  clock_.Advance(absl::Seconds(11));
  TANDEM_ASSERT_OK(c->Tick());
  EXPECT_EQ(c->Status().completed_rounds(), 2u);
  EXPECT_EQ(c->Status().history_size(), 2);
  TickUntil(*c, "done");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In("a")));
  EXPECT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_DONE);
}

// Killed after the aggregators released a round and before its own store
// recorded the release: on restart the resumed round is "closed" at the
// aggregators, and the coordinator recovers the release through their
// (idempotent) Finalize instead of stopping the task.
TEST_F(CoordinatorTest, ARoundReleasedJustBeforeACrashIsRecoveredOnRestart) {
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
    TickUntil(*c, "collecting");
    for (const char* id : {"a", "b"}) {
      TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
      TANDEM_ASSERT_OK(c->UploadDone(Done(id, 1)));
    }
  }  // "crash" while the aggregators release round 1
  leader_.accepted = helper_.accepted = 2;
  leader_.share_value = 1 << 12;
  leader_.refuse_open = helper_.refuse_open =
      absl::FailedPreconditionError("round 1 is closed");  // what the store answers
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  TANDEM_ASSERT_OK(c->Tick());  // resumed round: open refused -> Finalize
  EXPECT_FALSE(c->done()) << c->Status().done_reason();
  EXPECT_EQ(c->Status().completed_rounds(), 1u);
  ASSERT_EQ(c->Status().history_size(), 1);
  EXPECT_EQ(c->Status().history(0).accepted_reports(), 2u);
  ASSERT_FALSE(leader_.finalized.empty());
  EXPECT_EQ(leader_.finalized.back(), 1u);
  // A new round refused by the same status is a policy refusal: the task
  // stops with the aggregators' reason.
  for (int i = 0; i < 5 && !c->done(); ++i) TANDEM_ASSERT_OK(c->Tick());
  EXPECT_TRUE(c->done());
  EXPECT_NE(c->Status().done_reason().find("refused round 2"), std::string::npos)
      << c->Status().done_reason();
}

// The aggregators' own policy or budget refuses the round: the task stops
// with their reason rather than retrying until every deadline.
TEST_F(CoordinatorTest, AggregatorPolicyRefusalStopsTheTask) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  helper_.refuse_open =
      absl::FailedPreconditionError("releasing this round would spend epsilon 7.1, above 6");
  for (int i = 0; i < 5 && !c->done(); ++i) TANDEM_ASSERT_OK(c->Tick());
  ASSERT_TRUE(c->done());
  EXPECT_NE(c->Status().done_reason().find("epsilon 7.1"), std::string::npos)
      << c->Status().done_reason();
  EXPECT_EQ(c->Status().completed_rounds(), 0u);
  // A transient failure is retried instead.
  helper_.refuse_open = absl::OkStatus();
  helper_.fail_open = true;
  c.reset();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto d, Make());
  for (int i = 0; i < 5; ++i) TANDEM_ASSERT_OK(d->Tick());
  EXPECT_FALSE(d->done());
}

// Rounds of one upload each (one sampled client found per round), until
// the task is done.
class CoordinatorRoundsTest : public CoordinatorTest {
 protected:
  void RunOneUploadPerRound(Coordinator* c) {
    leader_.accepted = helper_.accepted = 1;
    for (int i = 0; i < 200 && !c->done(); ++i) {
      TANDEM_ASSERT_OK(c->Tick());
      if (c->Status().phase() != "collecting") continue;
      for (int k = 0; k < 50; ++k) {
        auto r = CheckIn(*c, In(absl::StrCat("c", k)));
        if (r.ok() && r->outcome() == proto::CheckInResponse::OUTCOME_TASK) {
          TANDEM_ASSERT_OK(c->UploadDone(Done(absl::StrCat("c", k), r->round_id())));
          break;
        }
      }
      clock_.Advance(absl::Seconds(11));
      TANDEM_ASSERT_OK(c->Tick());
    }
  }
};

TEST_F(CoordinatorRoundsTest, PrivacyBudgetStopsTheTaskAndConfigMismatchIsRefused) {
  CoordinatorOptions o = Options();
  o.rounds = 100;
  o.task.sample_rate = 0.5;
  o.task.secure_sum.noise_multiplier = 2.0;
  o.task.epsilon_budget = 3.0;
  o.min_reports = 1;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  ASSERT_NO_FATAL_FAILURE(RunOneUploadPerRound(c.get()));
  ASSERT_TRUE(c->done());
  const auto s = c->Status();
  EXPECT_LT(s.completed_rounds(), 100u);
  EXPECT_GT(s.completed_rounds(), 0u);
  EXPECT_LE(s.epsilon_spent(), 3.0);
  EXPECT_NE(s.done_reason().find("budget"), std::string::npos) << s.done_reason();
  c.reset();
  CoordinatorOptions other = o;
  other.task.secure_sum.clip_l2_norm = 5.0;
  EXPECT_THAT(Make(other).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A target epsilon sets the noise the aggregators are asked for: the task
// runs its planned rounds and ends on the target from below, not stopped by
// the budget (which defaults to the target).
TEST_F(CoordinatorRoundsTest, TargetEpsilonSetsTheNoiseOfEveryRound) {
  CoordinatorOptions o = Options();
  o.rounds = 6;
  o.task.sample_rate = 0.5;
  o.target_epsilon = 3.0;
  o.min_reports = 1;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  ASSERT_NO_FATAL_FAILURE(RunOneUploadPerRound(c.get()));
  ASSERT_TRUE(c->done());
  const auto s = c->Status();
  EXPECT_EQ(s.completed_rounds(), 6u) << s.done_reason();
  EXPECT_LE(s.epsilon_spent(), 3.0);
  EXPECT_GT(s.epsilon_spent(), 3.0 - 1e-3);
  ASSERT_EQ(leader_.opened.size(), 6u);
  EXPECT_NE(leader_.opened[0].noise_variance(), Options().task.secure_sum.noise_multiplier);
  for (const auto& p : leader_.opened) {
    EXPECT_EQ(p.noise_variance(), leader_.opened[0].noise_variance());
  }
  // A restart reuses the stored plan: the same task opens; a plan whose
  // noise differs from the one the task started with (as a changed
  // calibration would compute) is what the restart uses, and the task's
  // fingerprint then refuses it.
  c.reset();
  TANDEM_ASSERT_OK(Make(o).status());
  // Another given d is another plan (not the stored one): another task.
  CoordinatorOptions other_d = o;
  other_d.task.secure_sum.log_blocks_per_group += 1;
  EXPECT_THAT(Make(other_d).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, CoordinatorStore::Open((dir_ / "c.db").string()));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> plan,
                                store->GetMeta("planned_private_rounds"));
    ASSERT_TRUE(plan.has_value());
    const size_t z_at = plan->rfind(' ');
    TANDEM_ASSERT_OK(store->PutMeta("planned_private_rounds", plan->substr(0, z_at) + " 0x1p-1"));
  }
  EXPECT_THAT(Make(o).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, CoordinatorStore::Open((dir_ / "c.db").string()));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> plan,
                                store->GetMeta("planned_private_rounds"));
    ASSERT_TRUE(plan.has_value());
    TANDEM_ASSERT_OK(
        store->PutMeta("planned_private_rounds", plan->substr(0, plan->find(' ') + 1) + "3 z"));
  }
  EXPECT_THAT(Make(o).status(), StatusIs(absl::StatusCode::kDataLoss));
  o.target_epsilon = -1;
  EXPECT_THAT(Make(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// CheckIn signs and stores outside the coordinator's lock: concurrent
// check-ins still never assign more than max_reports, each device gets one
// assignment (the same ticket when it asks again) and every one is durable.
TEST_F(CoordinatorTest, ConcurrentCheckInsNeverExceedMaxReports) {
  CoordinatorOptions o = Options();
  o.task.secure_sum.max_reports = 5;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  TickUntil(*c, "collecting");
  constexpr int kThreads = 4, kDevices = 6;
  std::vector<proto::CheckInRequest> requests;
  for (int t = 0; t < kThreads; ++t) {
    for (int d = 0; d < kDevices; ++d) {
      requests.push_back(In(absl::StrCat("d", d)));  // each device asks kThreads times
    }
  }
  absl::Mutex mu;
  std::map<std::string, std::set<std::string>> tickets;  // device id -> tickets seen
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int d = 0; d < kDevices; ++d) {
        const proto::CheckInRequest& r = requests[t * kDevices + d];
        absl::StatusOr<proto::CheckInResponse> out = c->CheckIn(r);
        ASSERT_TRUE(out.ok()) << out.status();
        if (out->outcome() != proto::CheckInResponse::OUTCOME_TASK) continue;
        absl::MutexLock lock(&mu);
        tickets[r.client_id()].insert(out->ticket().SerializeAsString());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(tickets.size(), 5u);  // max_reports devices, never more
  for (const auto& [id, seen] : tickets) EXPECT_EQ(seen.size(), 1u) << id;
  EXPECT_EQ(c->Status().assigned(), 5u);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, CoordinatorStore::Open((dir_ / "c.db").string()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto stored, store->LoadAssignments(1));
  EXPECT_EQ(stored.size(), 5u);
}

TEST_F(CoordinatorTest, TicketsArePerClientSignedAndStableAcrossCheckInsAndRestarts) {
  TANDEM_ASSERT_OK_AND_ASSIGN(const crypto::Ed25519VerifyingKey verifier,
                              TicketKey().VerifyingKey());
  std::map<std::string, proto::UploadTicket> issued;
  int64_t deadline = 0;
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
    TickUntil(*c, "collecting");
    for (const char* id : {"a", "b"}) {
      TANDEM_ASSERT_OK_AND_ASSIGN(auto r, CheckIn(*c, In(id)));
      ASSERT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_TASK);
      deadline = r.deadline_unix_ms();
      TANDEM_ASSERT_OK_AND_ASSIGN(proto::UploadTicket t,
                                  crypto::VerifyUploadTicket(verifier, r.ticket()));
      EXPECT_EQ(t.task_id(), "t1");
      EXPECT_EQ(t.round_id(), 1u);
      EXPECT_EQ(t.expiry_unix_ms(), deadline);  // the round's deadline
      // Bound to the key that proved possession at check-in.
      EXPECT_EQ(t.device_public_key(), testing::TestDeviceKey(id).PublicKeyRaw());
      ASSERT_EQ(t.ticket_id().size(), 16u);
      TANDEM_EXPECT_OK(crypto::CheckTicketFor(t, "t1", 1, t.ticket_id(),
                                              absl::ToUnixMillis(clock_.Now())));
      // Another coordinator's key does not verify it.
      TANDEM_ASSERT_OK_AND_ASSIGN(auto other, TicketKey('x').VerifyingKey());
      EXPECT_THAT(crypto::VerifyUploadTicket(other, r.ticket()).status(),
                  StatusIs(absl::StatusCode::kUnauthenticated));
      TANDEM_ASSERT_OK_AND_ASSIGN(auto again, CheckIn(*c, In(id)));
      EXPECT_EQ(again.ticket().SerializeAsString(), r.ticket().SerializeAsString());
      issued[id] = t;
    }
    EXPECT_NE(issued["a"].ticket_id(), issued["b"].ticket_id());
    TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  }  // "crash"
  {
    // ticket_id = HMAC-SHA256(sampling key, "tandem.ticket.v1" || round || client)[:16].
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, CoordinatorStore::Open((dir_ / "c.db").string()));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<std::string> key, store->GetMeta("sampling_key"));
    ASSERT_TRUE(key.has_value());
    for (const char* id : {"a", "b"}) {
      std::string msg =
          std::string("tandem.ticket.v1") + std::string("\x01\0\0\0\0\0\0\0", 8) + Id(id);
      unsigned char mac[32];
      unsigned int len = 0;
      ASSERT_NE(HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len),
                nullptr);
      EXPECT_EQ(issued[id].ticket_id(), std::string(reinterpret_cast<char*>(mac), 16)) << id;
    }
  }
  const std::map<std::string, proto::SignedUploadTicket> before = tickets_;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  TickUntil(*c, "collecting");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, CheckIn(*c, In("b")));
  EXPECT_EQ(b.ticket().SerializeAsString(), before.at(Id("b")).SerializeAsString());  // same bytes
  EXPECT_EQ(b.deadline_unix_ms(), deadline);
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));  // the retry of a pre-restart UploadDone
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 1)));
  EXPECT_EQ(c->Status().uploads_done(), 2u);
}

TEST_F(CoordinatorTest, UploadDoneRefusesMissingForeignAndTamperedTickets) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());
  TickUntil(*c, "collecting");
  for (const char* id : {"a", "b"}) TANDEM_ASSERT_OK(CheckIn(*c, In(id)).status());
  const auto unauthenticated = StatusIs(absl::StatusCode::kUnauthenticated);
  proto::UploadDoneRequest none = Done("a", 1);
  none.clear_ticket();
  EXPECT_THAT(c->UploadDone(none), unauthenticated);
  proto::UploadDoneRequest foreign = Done("b", 1);  // b's ticket and report id, sent as a
  foreign.set_client_id(Id("a"));
  EXPECT_THAT(c->UploadDone(foreign), unauthenticated);
  proto::UploadDoneRequest bytes = Done("a", 1);
  bytes.mutable_ticket()->mutable_ticket()->back() ^= 1;
  EXPECT_THAT(c->UploadDone(bytes), unauthenticated);
  proto::UploadDoneRequest sig = Done("a", 1);
  (*sig.mutable_ticket()->mutable_signature())[5] ^= 0x20;
  EXPECT_THAT(c->UploadDone(sig), unauthenticated);
  // The right ticket content, signed by someone else.
  proto::UploadDoneRequest forged = Done("a", 1);
  proto::UploadTicket t;
  ASSERT_TRUE(t.ParseFromString(forged.ticket().ticket()));
  TANDEM_ASSERT_OK_AND_ASSIGN(*forged.mutable_ticket(), crypto::SignUploadTicket(TicketKey('x'), t));
  EXPECT_THAT(c->UploadDone(forged), unauthenticated);
  // A ticket the outsider made up for a, with its own key and id.
  t.set_ticket_id(std::string(16, 'o'));
  proto::UploadDoneRequest made_up = Done("a", 1, 'o');
  TANDEM_ASSERT_OK_AND_ASSIGN(*made_up.mutable_ticket(),
                              crypto::SignUploadTicket(TicketKey('x'), t));
  EXPECT_THAT(c->UploadDone(made_up), unauthenticated);
  EXPECT_EQ(c->Status().uploads_done(), 0u);  // nothing counted, every refusal is
  EXPECT_EQ(c->Metrics().unauthenticated_upload_done, 6u);
  TANDEM_ASSERT_OK(c->UploadDone(Done("a", 1)));
  TANDEM_ASSERT_OK(c->UploadDone(Done("b", 1)));
  EXPECT_EQ(c->Status().uploads_done(), 2u);
}

TEST_F(CoordinatorTest, DefaultsArePrivateAndOneServerForBothRolesIsRefused) {
  const CoordinatorOptions defaults;
  EXPECT_EQ(defaults.task.secure_sum.noise_multiplier, 1.0);
  EXPECT_TRUE(defaults.task.secure_sum.norm_proofs);
  EXPECT_EQ(defaults.task.secure_sum.min_batch_size, 10u);
  EXPECT_GE(defaults.min_reports, defaults.task.secure_sum.min_batch_size);
  CoordinatorOptions o = Options();
  o.task.secure_sum.min_batch_size = defaults.task.secure_sum.min_batch_size;
  o.min_reports = defaults.min_reports;
  o.leader.set_address("leader:7001");
  o.helper.set_address("helper:7002");
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
    TickUntil(*c, "collecting");
    const proto::RoundParameters& p = leader_.opened.at(0);
    EXPECT_EQ(p.dp().min_batch_size(), 10u);
    ASSERT_TRUE(p.has_norm_bound());
    EXPECT_EQ(std::sqrt(p.noise_variance()) /
                  std::sqrt(static_cast<double>(p.norm_bound().max_l2_squared())),
              1.0);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto a, CheckIn(*c, In("a")));
    EXPECT_EQ(a.leader().address(), "leader:7001");
    EXPECT_EQ(a.helper().address(), "helper:7002");
  }
  CoordinatorOptions small = o;
  small.min_reports = 9;  // a quorum the aggregators would never release
  EXPECT_THAT(Make(small).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  CoordinatorOptions same = o;
  same.helper.set_address("leader:7001");
  EXPECT_THAT(Make(same).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  same = o;
  same.leader.set_server_name("aggregator.tandem");
  same.helper.set_server_name("aggregator.tandem");
  EXPECT_THAT(Make(same).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::server
