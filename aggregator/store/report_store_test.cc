// Contract tests run against every ReportStore implementation.
#include "aggregator/store/report_store.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/store/in_memory_report_store.h"
#ifdef TANDEM_WITH_POSTGRES
#include "aggregator/store/postgres_report_store.h"
#include "aggregator/store/testing/postgres_server.h"
#endif
#include "aggregator/store/segment_report_store.h"
#include "aggregator/store/sqlite_report_store.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct StoreFactory {
  std::string name;
  std::function<std::unique_ptr<ReportStore>(const std::string& dir)> make;
};

class ReportStoreContractTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("tandem_store_", getpid(), "_", GetParam().name, "_",
                        std::hash<std::string>()(info->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = GetParam().make(dir_.string());
    ASSERT_NE(store_, nullptr);
    ASSERT_THAT(store_->OpenRound(1, "params-1"), IsOk());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> Ids(ReportFilter f, int64_t round = 1) {
    std::vector<std::string> out;
    auto list = store_->ListReports(round, f);
    EXPECT_THAT(list.status(), IsOk());
    if (list.ok()) {
      for (const auto& r : *list) out.push_back(r.report_id);
    }
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ReportStore> store_;
};

TEST_P(ReportStoreContractTest, RoundsOpenIdempotentlyAndClose) {
  EXPECT_THAT(store_->OpenRound(1, "params-1"), IsOk());
  EXPECT_THAT(store_->OpenRound(1, "other"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("other parameters")));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundRecord r, store_->GetRound(1));
  EXPECT_EQ(r.parameters, "params-1");
  EXPECT_EQ(r.state, RoundState::kOpen);
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  EXPECT_THAT(store_->CloseRound(1), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(r, store_->GetRound(1));
  EXPECT_EQ(r.state, RoundState::kClosed);
  EXPECT_THAT(store_->OpenRound(1, "params-1"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
  EXPECT_THAT(store_->GetRound(2), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 2")));
  EXPECT_THAT(store_->CloseRound(2), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 2")));
  EXPECT_THAT(store_->OpenRound(-1, ""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(">= 0")));
  EXPECT_THAT(store_->OpenRound(3, std::string(kMaxParametersBytes + 1, 'p')), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parameters")));
  ASSERT_THAT(store_->OpenRound(0, ""), IsOk());  // Empty parameters are allowed.
}

TEST_P(ReportStoreContractTest, PutPendingIsIdempotentForIdenticalContent) {
  ASSERT_THAT(store_->PutPending(1, "r1", "share-a"), IsOk());
  EXPECT_THAT(store_->PutPending(1, "r1", "share-a"), IsOk());
  EXPECT_THAT(store_->PutPending(1, "r1", "share-b"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord r, store_->GetReport("r1"));
  EXPECT_EQ(r.round_id, 1);
  EXPECT_EQ(r.state, ReportState::kPending);
  EXPECT_FALSE(r.counted);
  EXPECT_EQ(r.share, "share-a");
  EXPECT_EQ(r.share_digest, ShareDigest("share-a"));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("r1"));
}

TEST_P(ReportStoreContractTest, ReplayInALaterRoundIsRefused) {
  ASSERT_THAT(store_->PutPending(1, "r1", "s"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("r1"), IsOk());
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  EXPECT_THAT(store_->PutPending(2, "r1", "s"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
  EXPECT_THAT(Ids(ReportFilter::kAll, 2), ElementsAre());
}

TEST_P(ReportStoreContractTest, PutPendingValidatesArgumentsAndRound) {
  EXPECT_THAT(store_->PutPending(1, "", "s"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report id")));
  EXPECT_THAT(store_->PutPending(1, std::string(kMaxReportIdBytes + 1, 'x'), "s"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report id")));
  EXPECT_THAT(store_->PutPending(-5, "r", "s"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("round id")));
  EXPECT_THAT(store_->PutPending(9, "r", "s"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 9")));
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  EXPECT_THAT(store_->PutPending(1, "r", "s"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
}

TEST_P(ReportStoreContractTest, BinaryIdsAndSharesRoundTrip) {
  const std::string id("\0\x01\xff", 3), share("\0\0\xfe\0", 4);
  ASSERT_THAT(store_->PutPending(1, id, share), IsOk());
  ASSERT_THAT(store_->PutPending(1, std::string("\0\x01", 2), ""), IsOk());  // Prefix id, empty share.
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord r, store_->GetReport(id));
  EXPECT_EQ(r.share, share);
  EXPECT_EQ(Ids(ReportFilter::kAll).size(), 2u);
}

TEST_P(ReportStoreContractTest, GetReportsReadsABatchAndLeavesOutUnknownIds) {
  const std::string binary("\0\x01\xff", 3);
  ASSERT_THAT(store_->PutPending(1, "a", "share-a"), IsOk());
  ASSERT_THAT(store_->PutPending(1, binary, "share-b"), IsOk());
  ASSERT_THAT(store_->CommitBatch(1, "acc", {"a"}, {}), IsOk());
  const std::vector<std::string> ids = {"a", binary, "unknown", "a"};
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto got, store_->GetReports(ids));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got.at("a").counted);
  EXPECT_EQ(got.at("a").share, "");  // counted: the share is gone
  EXPECT_EQ(got.at(binary).state, ReportState::kPending);
  EXPECT_EQ(got.at(binary).share, "share-b");
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto none, store_->GetReports({}));
  EXPECT_TRUE(none.empty());
  const std::vector<std::string> bad = {"a", ""};
  EXPECT_THAT(store_->GetReports(bad).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(ReportStoreContractTest, StateMachineAllowsOnlyPendingToAcceptedOrRejected) {
  ASSERT_THAT(store_->PutPending(1, "a", "sa"), IsOk());
  ASSERT_THAT(store_->PutPending(1, "b", "sb"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("a"), IsOk());
  EXPECT_THAT(store_->MarkAccepted("a"), IsOk());  // Repeat: no-op.
  EXPECT_THAT(store_->MarkRejected("a"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no longer pending")));
  ASSERT_THAT(store_->MarkRejected("b"), IsOk());
  EXPECT_THAT(store_->MarkRejected("b"), IsOk());
  EXPECT_THAT(store_->MarkAccepted("b"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no longer pending")));
  EXPECT_THAT(store_->MarkAccepted("zzz"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("report")));
  EXPECT_THAT(store_->MarkAccepted(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("report id")));
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord rb, store_->GetReport("b"));
  EXPECT_EQ(rb.state, ReportState::kRejected);
  EXPECT_EQ(rb.share, "");  // Rejected shares are dropped.
  EXPECT_THAT(store_->PutPending(1, "b", "sb"), IsOk());  // Idempotent by digest.
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre("a"));
  EXPECT_THAT(Ids(ReportFilter::kRejected), ElementsAre("b"));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre());
  ASSERT_THAT(store_->PutPending(1, "c", "sc"), IsOk());
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  EXPECT_THAT(store_->MarkAccepted("c"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
}

TEST_P(ReportStoreContractTest, SaveAccumulatorCountsAtomically) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_THAT(store_->PutPending(1, id, absl::StrCat("s", id)), IsOk());
  ASSERT_THAT(store_->MarkAccepted("a"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("b"), IsOk());
  ASSERT_THAT(store_->MarkRejected("c"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.version, 0);
  EXPECT_EQ(snap.report_count, 0);
  EXPECT_EQ(snap.bytes, "");

  const std::vector<std::string> first = {"a"};
  ASSERT_THAT(store_->SaveAccumulator(1, "acc-a", first), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-a");
  EXPECT_EQ(snap.report_count, 1);
  EXPECT_EQ(snap.version, 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord ra, store_->GetReport("a"));
  EXPECT_TRUE(ra.counted);
  EXPECT_EQ(ra.share, "");
  EXPECT_EQ(ra.share_digest, ShareDigest("sa"));
  EXPECT_THAT(store_->PutPending(1, "a", "sa"), IsOk());  // Still idempotent once counted.

  // All or nothing: "a" is already counted, so "b" must stay uncounted.
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"b", "a"}, {"b", "c"}, {"b", "d"}, {"b", "nope"}}) {
    EXPECT_THAT(store_->SaveAccumulator(1, "acc-bad", bad), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not accepted")));
  }
  EXPECT_THAT(store_->SaveAccumulator(1, "acc-bad", std::vector<std::string>{"b", "b"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-a");
  EXPECT_EQ(snap.version, 1);
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre("b"));

  ASSERT_THAT(store_->SaveAccumulator(1, "acc-ab", std::vector<std::string>{"b"}), IsOk());
  ASSERT_THAT(store_->SaveAccumulator(1, "acc-ab2", {}), IsOk());  // Bytes-only rewrite.
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-ab2");
  EXPECT_EQ(snap.report_count, 2);
  EXPECT_EQ(snap.version, 3);
  EXPECT_THAT(Ids(ReportFilter::kCounted), ElementsAre("a", "b"));
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre());
}

TEST_P(ReportStoreContractTest, SaveAccumulatorChecksRound) {
  ASSERT_THAT(store_->OpenRound(2, "p2"), IsOk());
  ASSERT_THAT(store_->PutPending(2, "x", "sx"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("x"), IsOk());
  // "x" belongs to round 2, not round 1.
  EXPECT_THAT(store_->SaveAccumulator(1, "acc", std::vector<std::string>{"x"}), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not accepted")));
  EXPECT_THAT(store_->SaveAccumulator(7, "acc", {}), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 7")));
  EXPECT_THAT(store_->LoadAccumulator(7), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 7")));
  EXPECT_THAT(store_->ListReports(7, ReportFilter::kAll), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 7")));
  ASSERT_THAT(store_->CloseRound(2), IsOk());
  EXPECT_THAT(store_->SaveAccumulator(2, "acc", std::vector<std::string>{"x"}), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
  // A closed round's snapshot stays readable.
  EXPECT_THAT(store_->LoadAccumulator(2), IsOk());
}

TEST_P(ReportStoreContractTest, CommitBatchCountsAndRejectsInOneStep) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("b"), IsOk());  // accepted, not yet counted
  const std::vector<std::string> count = {"a", "b"};
  const std::vector<std::string> reject = {"c"};
  ASSERT_THAT(store_->CommitBatch(1, "acc-ab", count, reject), IsOk());
  EXPECT_THAT(Ids(ReportFilter::kCounted), ElementsAre("a", "b"));
  EXPECT_THAT(Ids(ReportFilter::kRejected), ElementsAre("c"));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("d"));
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-ab");
  EXPECT_EQ(snap.report_count, 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord a, store_->GetReport("a"));
  EXPECT_TRUE(a.share.empty());
  // Only rejections: the accumulator stays as it was.
  const std::vector<std::string> none;
  const std::vector<std::string> reject_d = {"d", "c"};  // c again: no-op
  ASSERT_THAT(store_->CommitBatch(1, "ignored", none, reject_d), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-ab");
  EXPECT_EQ(snap.report_count, 2);
}

TEST_P(ReportStoreContractTest, CommitBatchIsAllOrNothing) {
  for (const char* id : {"a", "b"}) ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  ASSERT_THAT(store_->MarkRejected("b"), IsOk());
  const std::vector<std::string> count = {"a", "b"};  // b is rejected: refused
  const std::vector<std::string> none;
  EXPECT_THAT(store_->CommitBatch(1, "x", count, none),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("a"));  // a untouched
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.report_count, 0);
  const std::vector<std::string> twice = {"a", "a"};
  EXPECT_THAT(store_->CommitBatch(1, "x", twice, none),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const std::vector<std::string> a = {"a"};
  EXPECT_THAT(store_->CommitBatch(1, "x", a, a), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(store_->CommitBatch(1, "x", a, none), IsOk());
  EXPECT_THAT(store_->CommitBatch(1, "y", a, none),
              StatusIs(absl::StatusCode::kFailedPrecondition));  // counted once only
}

TEST_P(ReportStoreContractTest, CommitDecisionsKeepsAcceptedSharesUntilTheCheckpoint) {
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_THAT(store_->PutPending(1, id, absl::StrCat("share-", id)), IsOk());
  }
  const std::vector<std::string> accept = {"a", "b"};
  const std::vector<std::string> reject = {"c"};
  ASSERT_THAT(store_->CommitDecisions(1, accept, reject), IsOk());
  // Decided, not counted: the accepted keep their shares for a restart.
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre("a", "b"));
  EXPECT_THAT(Ids(ReportFilter::kCounted), ElementsAre());
  EXPECT_THAT(Ids(ReportFilter::kRejected), ElementsAre("c"));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("d"));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord a, store_->GetReport("a"));
  EXPECT_EQ(a.state, ReportState::kAccepted);
  EXPECT_FALSE(a.counted);
  EXPECT_EQ(a.share, "share-a");
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord c, store_->GetReport("c"));
  EXPECT_TRUE(c.share.empty());
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.version, 0);  // no accumulator written
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts counts, store_->CountReports(1));
  EXPECT_EQ(counts.accepted, 2);
  // A repeat is a no-op; the checkpoint (with d decided at the same time)
  // counts them and drops the shares.
  ASSERT_THAT(store_->CommitDecisions(1, accept, reject), IsOk());
  const std::vector<std::string> count = {"a", "b", "d"};
  ASSERT_THAT(store_->CommitBatch(1, "acc-abd", count, {}), IsOk());
  EXPECT_THAT(Ids(ReportFilter::kCounted), ElementsAre("a", "b", "d"));
  TANDEM_ASSERT_OK_AND_ASSIGN(a, store_->GetReport("a"));
  EXPECT_TRUE(a.share.empty());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.report_count, 3);
  // Counted reports stay accepted: accepting again is a no-op.
  ASSERT_THAT(store_->CommitDecisions(1, accept, {}), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.report_count, 3);
}

TEST_P(ReportStoreContractTest, CommitDecisionsIsAllOrNothing) {
  for (const char* id : {"a", "b", "c"}) ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  ASSERT_THAT(store_->MarkRejected("b"), IsOk());
  ASSERT_THAT(store_->MarkAccepted("c"), IsOk());
  const std::vector<std::string> accept_ab = {"a", "b"};  // b is rejected
  EXPECT_THAT(store_->CommitDecisions(1, accept_ab, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("a"));  // a untouched
  const std::vector<std::string> a = {"a"};
  const std::vector<std::string> c = {"c"};  // accepted: cannot be rejected
  EXPECT_THAT(store_->CommitDecisions(1, a, c), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("a"));
  EXPECT_THAT(store_->CommitDecisions(1, a, a), StatusIs(absl::StatusCode::kInvalidArgument));
  const std::vector<std::string> unknown = {"zz"};
  EXPECT_THAT(store_->CommitDecisions(1, unknown, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  EXPECT_THAT(store_->CommitDecisions(2, a, {}),  // a report of round 1
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->CommitDecisions(9, a, {}), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  EXPECT_THAT(store_->CommitDecisions(1, a, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("a"));
}

TEST_P(ReportStoreContractTest, PutPendingBatchAnswersPerReport) {
  ASSERT_THAT(store_->PutPending(1, "old", "s0"), IsOk());
  const std::vector<PendingReport> batch = {
      {"a", "sa"}, {"old", "different"}, {"", "bad-id"}, {"b", "sb"}, {"a", "sa"}, {"b", "other"}};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<absl::Status> out, store_->PutPendingBatch(1, batch));
  ASSERT_EQ(out.size(), batch.size());
  EXPECT_THAT(out[0], IsOk());
  EXPECT_THAT(out[1], StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(out[2], StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(out[3], IsOk());
  EXPECT_THAT(out[4], IsOk());  // identical repeat inside the batch
  EXPECT_THAT(out[5], StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("a", "b", "old"));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_EQ(b.share, "sb");
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  EXPECT_THAT(store_->PutPendingBatch(1, batch), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->PutPendingBatch(9, batch), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(ReportStoreContractTest, ReleaseRoundSavesTheShareAndClosesInOneStep) {
  for (const char* id : {"a", "b"}) ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  const std::vector<std::string> a = {"a"};
  ASSERT_THAT(store_->CommitBatch(1, "acc-a", a, {}), IsOk());
  ASSERT_THAT(store_->ReleaseRound(1, "noised-a"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundRecord round, store_->GetRound(1));
  EXPECT_EQ(round.state, RoundState::kReleased);
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "noised-a");
  EXPECT_EQ(snap.report_count, 1);  // the counted reports are unchanged
  // Released once: no second release, no reopening, no more writes; a
  // CloseRound leaves it released.
  EXPECT_THAT(store_->ReleaseRound(1, "again"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->OpenRound(1, "params-1"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->PutPending(1, "c", "s"), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(round, store_->GetRound(1));
  EXPECT_EQ(round.state, RoundState::kReleased);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<RoundRecord> rounds, store_->ListRounds());
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].state, RoundState::kReleased);
  // An abandoned round cannot be released afterwards.
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  ASSERT_THAT(store_->CloseRound(2), IsOk());
  EXPECT_THAT(store_->ReleaseRound(2, "x"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->ReleaseRound(9, "x"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(ReportStoreContractTest, CountAndReleaseCountsTheLastReportsAndReleasesAtOnce) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  const std::vector<std::string> a = {"a"}, bc = {"b", "c"}, d = {"d"};
  ASSERT_THAT(store_->CommitBatch(1, "acc-a", a, {}), IsOk());
  ASSERT_THAT(store_->CommitDecisions(1, bc, {}), IsOk());  // accepted, not counted yet
  // All or nothing: a pending report cannot be counted, and then neither
  // is anything else, nor is the round released.
  const std::vector<std::string> bd = {"b", "d"};
  EXPECT_THAT(store_->CountAndRelease(1, "acc-abd", bd, "noised-abd"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundRecord round, store_->GetRound(1));
  EXPECT_EQ(round.state, RoundState::kOpen);
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre("b", "c"));
  EXPECT_THAT(Ids(ReportFilter::kPending), ElementsAre("d"));
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-a");
  EXPECT_EQ(snap.report_count, 1);

  ASSERT_THAT(store_->CountAndRelease(1, "acc-abc", bc, "noised-abc"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(round, store_->GetRound(1));
  EXPECT_EQ(round.state, RoundState::kReleased);
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "noised-abc");
  EXPECT_EQ(snap.report_count, 3);
  EXPECT_THAT(Ids(ReportFilter::kCounted), ElementsAre("a", "b", "c"));
  EXPECT_THAT(Ids(ReportFilter::kAcceptedUncounted), ElementsAre());
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_TRUE(b.share.empty());  // counted: the share is dropped
  EXPECT_FALSE(b.share_digest.empty());
  EXPECT_THAT(store_->CountAndRelease(1, "x", d, "y"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Nothing newly counted is ReleaseRound.
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  ASSERT_THAT(store_->CountAndRelease(2, "acc", {}, "noised-2"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(2));
  EXPECT_EQ(snap.bytes, "noised-2");
  EXPECT_EQ(snap.report_count, 0);
  EXPECT_THAT(store_->CountAndRelease(9, "acc", {}, "x"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(ReportStoreContractTest, TheFirstRoundSecretWins) {
  TANDEM_ASSERT_OK_AND_ASSIGN(std::string s, store_->BindRoundSecret(1, "seed-a"));
  EXPECT_EQ(s, "seed-a");
  TANDEM_ASSERT_OK_AND_ASSIGN(s, store_->BindRoundSecret(1, "seed-b"));
  EXPECT_EQ(s, "seed-a");
  EXPECT_THAT(store_->BindRoundSecret(1, ""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->BindRoundSecret(1, std::string(1025, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->BindRoundSecret(9, "x"), StatusIs(absl::StatusCode::kNotFound));
  // A closed round keeps its secret but gets no new one.
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  ASSERT_THAT(store_->CloseRound(1), IsOk());
  ASSERT_THAT(store_->CloseRound(2), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(s, store_->BindRoundSecret(1, "seed-c"));
  EXPECT_EQ(s, "seed-a");
  EXPECT_THAT(store_->BindRoundSecret(2, "x"), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_P(ReportStoreContractTest, CountReportsByStateWithoutShares) {
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    ASSERT_THAT(store_->PutPending(1, id, "s"), IsOk());
  }
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  ASSERT_THAT(store_->PutPending(2, "other-round", "s"), IsOk());
  const std::vector<std::string> count = {"a", "b"};
  const std::vector<std::string> reject = {"c"};
  ASSERT_THAT(store_->CommitBatch(1, "acc", count, reject), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts c, store_->CountReports(1));
  EXPECT_EQ(c.pending, 2);
  EXPECT_EQ(c.accepted, 2);
  EXPECT_EQ(c.rejected, 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(c, store_->CountReports(2));
  EXPECT_EQ(c.pending, 1);
  EXPECT_EQ(c.accepted + c.rejected, 0);
  TANDEM_ASSERT_OK_AND_ASSIGN(c, store_->CountReports(7));  // no reports: zeros
  EXPECT_EQ(c.pending + c.accepted + c.rejected, 0);
}

TEST_P(ReportStoreContractTest, StatesAreTheRecordsWithoutTheirShares) {
  // Every state a record can be in, and the round filter; each read right
  // after the write that made it (the segment store reads states through a
  // second connection: it must see every commit).
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_THAT(store_->PutPending(1, id, absl::StrCat("share-", id)), IsOk());
  }
  ASSERT_THAT(store_->CommitBatch(1, "acc", {"a"}, {"b"}), IsOk());
  ASSERT_THAT(store_->CommitDecisions(1, {"c"}, {}), IsOk());  // accepted, uncounted
  ASSERT_THAT(store_->OpenRound(2, "params-2"), IsOk());
  ASSERT_THAT(store_->PutPending(2, "e", "share-e"), IsOk());
  const std::vector<std::string> ids = {"a", "b", "c", "d", "e", "unknown"};
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto full, store_->GetReports(ids));
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto states, store_->GetReportStates(ids));
  ASSERT_EQ(states.size(), 5u);
  ASSERT_EQ(full.size(), 5u);
  for (const auto& [id, r] : full) {
    SCOPED_TRACE(id);
    const ReportRecord& s = states.at(id);
    EXPECT_EQ(s.report_id, r.report_id);
    EXPECT_EQ(s.round_id, r.round_id);
    EXPECT_EQ(s.state, r.state);
    EXPECT_EQ(s.counted, r.counted);
    EXPECT_EQ(s.share_digest, r.share_digest);
    EXPECT_EQ(s.share, "");
  }
  EXPECT_EQ(full.at("d").share, "share-d");  // the full read still has it
  for (ReportFilter f : {ReportFilter::kPending, ReportFilter::kAcceptedUncounted,
                         ReportFilter::kCounted, ReportFilter::kRejected, ReportFilter::kAll}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const auto listed, store_->ListReports(1, f));
    TANDEM_ASSERT_OK_AND_ASSIGN(const auto listed_states, store_->ListReportStates(1, f));
    ASSERT_EQ(listed_states.size(), listed.size());
    for (size_t i = 0; i < listed.size(); ++i) {
      EXPECT_EQ(listed_states[i].report_id, listed[i].report_id);
      EXPECT_EQ(listed_states[i].state, listed[i].state);
      EXPECT_EQ(listed_states[i].share, "");
    }
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto pending, store_->ListReportStates(1, ReportFilter::kPending));
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].report_id, "d");
  EXPECT_THAT(store_->ListReportStates(9, ReportFilter::kAll).status(),
              StatusIs(absl::StatusCode::kNotFound));
  const std::vector<std::string> bad = {"a", ""};
  EXPECT_THAT(store_->GetReportStates(bad).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

#ifdef TANDEM_WITH_POSTGRES
// One real PostgreSQL server per test binary; each test gets a fresh task
// (named after its fresh directory) in the shared database.
std::unique_ptr<ReportStore> OpenPostgresStore(const std::string& dir) {
  static int opened = 0;
  absl::StatusOr<testing::PostgresServer*> server = testing::PostgresServer::Shared();
  EXPECT_THAT(server.status(), IsOk());
  if (!server.ok()) return nullptr;
  auto s = PostgresReportStore::Open(
      (*server)->conninfo(),
      absl::StrCat(std::filesystem::path(dir).filename().string(), "_", ++opened));
  EXPECT_THAT(s.status(), IsOk());
  return s.ok() ? std::move(*s) : nullptr;
}
#endif

INSTANTIATE_TEST_SUITE_P(
    Implementations, ReportStoreContractTest,
    ::testing::Values(
        StoreFactory{"InMemory", [](const std::string&) -> std::unique_ptr<ReportStore> {
                       return std::make_unique<InMemoryReportStore>();
                     }},
        StoreFactory{"Sqlite", [](const std::string& dir) -> std::unique_ptr<ReportStore> {
                       auto s = SqliteReportStore::Open(dir + "/store.db");
                       EXPECT_THAT(s.status(), IsOk());
                       return s.ok() ? std::move(*s) : nullptr;
                     }},
        StoreFactory{"Segment", [](const std::string& dir) -> std::unique_ptr<ReportStore> {
                       SegmentStoreOptions options;
                       options.max_segment_bytes = 256;  // rotate often
                       auto s = SegmentReportStore::Open(dir + "/segstore", options);
                       EXPECT_THAT(s.status(), IsOk());
                       return s.ok() ? std::move(*s) : nullptr;
                     }}
#ifdef TANDEM_WITH_POSTGRES
        ,
        StoreFactory{"Postgres", OpenPostgresStore}
#endif
        ),
    [](const ::testing::TestParamInfo<StoreFactory>& info) { return info.param.name; });

}  // namespace
}  // namespace tandem::aggregator
