#include "aggregator/store/fault_injecting_report_store.h"

#include <string>
#include <vector>

#include "aggregator/store/in_memory_report_store.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(FaultInjectingReportStore, FailsTheNthWriteBeforeReachingTheStore) {
  InMemoryReportStore inner;
  FaultInjectingReportStore store(&inner);
  ASSERT_THAT(store.OpenRound(1, "p"), IsOk());
  store.FailNthWrite(2);
  ASSERT_THAT(store.PutPending(1, "a", "sa"), IsOk());           // write 1 of the arming
  EXPECT_THAT(store.GetReport("a"), IsOk());                     // reads do not count
  EXPECT_THAT(store.PutPending(1, "b", "sb"), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  EXPECT_THAT(inner.GetReport("b"), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(store.PutPending(1, "b", "sb"), IsOk());  // One-shot: the retry passes.
  EXPECT_EQ(store.writes(), 4);
}

TEST(FaultInjectingReportStore, AfterWriteModeLosesOnlyTheAcknowledgement) {
  InMemoryReportStore inner;
  FaultInjectingReportStore store(&inner);
  ASSERT_THAT(store.OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store.PutPending(1, "a", "sa"), IsOk());
  ASSERT_THAT(store.MarkAccepted("a"), IsOk());
  store.FailNthWrite(1, FaultMode::kAfterWrite, absl::InternalError("disk on fire"));
  const std::vector<std::string> ids = {"a"};
  EXPECT_THAT(store.SaveAccumulator(1, "acc", ids), StatusIs(absl::StatusCode::kInternal, HasSubstr("disk on fire")));
  // The write happened: a blind retry is refused (no double count) and the
  // caller recovers by reading the snapshot back.
  EXPECT_THAT(store.SaveAccumulator(1, "acc", ids), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  TANDEM_ASSERT_OK_AND_ASSIGN(const AccumulatorSnapshot snap, store.LoadAccumulator(1));
  EXPECT_EQ(snap.report_count, 1);
  EXPECT_EQ(snap.bytes, "acc");
}

TEST(FaultInjectingReportStore, FailedSaveLeavesReportsUncounted) {
  InMemoryReportStore inner;
  FaultInjectingReportStore store(&inner);
  ASSERT_THAT(store.OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store.PutPending(1, "a", "sa"), IsOk());
  ASSERT_THAT(store.MarkAccepted("a"), IsOk());
  store.FailNthWrite(1);
  EXPECT_THAT(store.SaveAccumulator(1, "acc", std::vector<std::string>{"a"}), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto uncounted, store.ListReports(1, ReportFilter::kAcceptedUncounted));
  ASSERT_EQ(uncounted.size(), 1u);
  EXPECT_EQ(uncounted[0].share, "sa");
  EXPECT_THAT(store.SaveAccumulator(1, "acc", std::vector<std::string>{"a"}), IsOk());
}

TEST(FaultInjectingReportStore, DisarmAndEveryWriteKindCounts) {
  InMemoryReportStore inner;
  FaultInjectingReportStore store(&inner);
  store.FailNthWrite(1);
  store.FailNthWrite(0);  // Disarmed.
  ASSERT_THAT(store.OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store.PutPending(1, "a", "sa"), IsOk());
  ASSERT_THAT(store.PutPending(1, "b", "sb"), IsOk());
  ASSERT_THAT(store.MarkAccepted("a"), IsOk());
  ASSERT_THAT(store.MarkRejected("b"), IsOk());
  ASSERT_THAT(store.SaveAccumulator(1, "x", {}), IsOk());
  ASSERT_THAT(store.CloseRound(1), IsOk());
  EXPECT_EQ(store.writes(), 7);
  EXPECT_THAT(store.ListReports(1, ReportFilter::kAll), IsOk());
  EXPECT_THAT(store.GetRound(1), IsOk());
  EXPECT_EQ(store.writes(), 7);
  store.FailNthWrite(1);
  EXPECT_THAT(store.CloseRound(1), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
}

}  // namespace
}  // namespace tandem::aggregator
