// Faults under PostgresReportStore, on a real server: the backend killed
// (pg_terminate_backend) after a write transaction's statements ran and
// before its COMMIT, an idle connection killed between calls, the server
// stopped (fast shutdown) and started again during a round, and the server
// killed (SIGKILL) during uploads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/store/postgres_report_store.h"
#include "aggregator/store/testing/postgres_server.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::PostgresServer;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A task id unique in this process (also under --gtest_repeat).
std::string NewTask() {
  static int n = 0;
  return absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "_", ++n);
}

std::vector<std::string> Ids(ReportStore& store, ReportFilter f) {
  std::vector<std::string> out;
  auto list = store.ListReports(1, f);
  EXPECT_THAT(list.status(), IsOk());
  if (list.ok()) {
    for (const ReportRecord& r : *list) out.push_back(r.report_id);
  }
  return out;
}

// Terminates the store's backend (found by its application_name) from a
// second connection and waits until it is gone.
void KillBackend(PostgresServer& server, const std::string& application_name) {
  absl::StatusOr<std::string> killed = server.Query(absl::StrCat(
      "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
      "WHERE application_name = '",
      application_name, "') t"));
  ASSERT_THAT(killed.status(), IsOk());
  EXPECT_EQ(*killed, "1");
}

TEST(PostgresFaultTest, BackendKilledBeforeCommitStoresNothingAndTheNextCallReconnects) {
  TANDEM_ASSERT_OK_AND_ASSIGN(PostgresServer * server, PostgresServer::Shared());
  const std::string app = "tandem-fault-test";
  bool armed = false;
  std::vector<std::string> killed_in;
  PostgresStoreOptions options;
  options.application_name = app;
  options.before_commit = [&](absl::string_view op) {
    if (!armed) return;
    armed = false;
    killed_in.emplace_back(op);
    KillBackend(*server, app);
  };
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store,
                              PostgresReportStore::Open(server->conninfo(), NewTask(), options));
  ASSERT_THAT(store->OpenRound(1, "p"), IsOk());

  // Upload: killed before COMMIT -> UNAVAILABLE, no share bytes in the
  // message, nothing stored; the next call reconnects.
  const std::vector<PendingReport> batch = {
      {"a", "SECRET-share-a"}, {"b", "SECRET-share-b"}, {"c", "SECRET-share-c"}};
  armed = true;
  absl::StatusOr<std::vector<absl::Status>> put = store->PutPendingBatch(1, batch);
  EXPECT_THAT(put.status(), StatusIs(absl::StatusCode::kUnavailable, Not(HasSubstr("SECRET"))));
  EXPECT_THAT(killed_in, ElementsAre("PutPendingBatch"));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts counts, store->CountReports(1));
  EXPECT_EQ(counts.pending, 0);
  EXPECT_THAT(store->GetReport("a"), StatusIs(absl::StatusCode::kNotFound));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<absl::Status> answers, store->PutPendingBatch(1, batch));
  for (const absl::Status& s : answers) EXPECT_THAT(s, IsOk());
  EXPECT_THAT(Ids(*store, ReportFilter::kPending), ElementsAre("a", "b", "c"));

  // Decided batch: killed before COMMIT -> no report changed state, no
  // accumulator written; the retry commits it once.
  const std::vector<std::string> count = {"a", "b"}, reject = {"c"};
  armed = true;
  EXPECT_THAT(store->CommitBatch(1, "acc-ab", count, reject),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Ids(*store, ReportFilter::kPending), ElementsAre("a", "b", "c"));
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store->LoadAccumulator(1));
  EXPECT_EQ(snap.version, 0);
  ASSERT_THAT(store->CommitBatch(1, "acc-ab", count, reject), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-ab");
  EXPECT_EQ(snap.report_count, 2);
  EXPECT_EQ(snap.version, 1);

  // The release: killed -> still open with the un-noised accumulator.
  armed = true;
  EXPECT_THAT(store->ReleaseRound(1, "noised"), StatusIs(absl::StatusCode::kUnavailable));
  TANDEM_ASSERT_OK_AND_ASSIGN(RoundRecord round, store->GetRound(1));
  EXPECT_EQ(round.state, RoundState::kOpen);
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-ab");
  ASSERT_THAT(store->ReleaseRound(1, "noised"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "noised");
  EXPECT_EQ(snap.report_count, 2);
  EXPECT_THAT(killed_in, ElementsAre("PutPendingBatch", "CommitBatch", "ReleaseRound"));
}

TEST(PostgresFaultTest, AnIdleConnectionKilledBetweenCallsFailsOnceThenReconnects) {
  TANDEM_ASSERT_OK_AND_ASSIGN(PostgresServer * server, PostgresServer::Shared());
  const std::string app = "tandem-idle-test";
  PostgresStoreOptions options;
  options.application_name = app;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store,
                              PostgresReportStore::Open(server->conninfo(), NewTask(), options));
  ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store->PutPending(1, "a", "share-a"), IsOk());
  KillBackend(*server, app);
  EXPECT_THAT(store->PutPending(1, "b", "share-b"), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(store->PutPending(1, "b", "share-b"), IsOk());
  EXPECT_THAT(Ids(*store, ReportFilter::kPending), ElementsAre("a", "b"));
}

TEST(PostgresFaultTest, ServerRestartDuringARoundKeepsEveryAcknowledgedReport) {
  // Its own server: this test stops it.
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PostgresServer> server, PostgresServer::Start());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, PostgresReportStore::Open(server->conninfo(), "task"));
  ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
  std::vector<std::string> acknowledged;
  for (int i = 0; i < 10; ++i) {
    const std::string id = absl::StrCat("r", i);
    ASSERT_THAT(store->PutPending(1, id, absl::StrCat("share-", i)), IsOk());
    acknowledged.push_back(id);
  }
  const std::vector<std::string> accept = {"r0", "r1"}, reject = {"r2"};
  ASSERT_THAT(store->CommitDecisions(1, accept, reject), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(std::string secret, store->BindRoundSecret(1, "seed-1"));

  ASSERT_THAT(server->Stop(), IsOk());  // fast shutdown
  EXPECT_THAT(store->PutPending(1, "down-1", "s"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(store->PutPending(1, "down-2", "s"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(store->GetRound(1), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(PostgresReportStore::Open(server->conninfo(), "task").status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot connect")));

  ASSERT_THAT(server->Restart(), IsOk());
  ASSERT_THAT(store->PutPending(1, "r10", "share-10"), IsOk());
  acknowledged.push_back("r10");
  std::vector<std::string> all = Ids(*store, ReportFilter::kAll);
  std::sort(acknowledged.begin(), acknowledged.end());
  EXPECT_EQ(all, acknowledged);  // every acknowledged report, nothing of the outage
  for (int i = 3; i <= 10; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, store->GetReport(absl::StrCat("r", i)));
    EXPECT_EQ(r.state, ReportState::kPending);
    EXPECT_EQ(r.share, absl::StrCat("share-", i));
  }
  EXPECT_THAT(Ids(*store, ReportFilter::kAcceptedUncounted), ElementsAre("r0", "r1"));
  EXPECT_THAT(Ids(*store, ReportFilter::kRejected), ElementsAre("r2"));
  EXPECT_THAT(store->BindRoundSecret(1, "seed-2"), ::tandem::testing::IsOkAndHolds("seed-1"));
  // A fresh store (a restarted replica) sees the same.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto again, PostgresReportStore::Open(server->conninfo(), "task"));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts counts, again->CountReports(1));
  EXPECT_EQ(counts.pending, 8);
  EXPECT_EQ(counts.accepted, 2);
  EXPECT_EQ(counts.rejected, 1);
}

TEST(PostgresFaultTest, ServerCrashDuringUploadsKeepsEveryAcknowledgedReport) {
  // Its own server: this test kills it (SIGKILL: no shutdown, crash recovery).
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PostgresServer> server, PostgresServer::Start());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, PostgresReportStore::Open(server->conninfo(), "task"));
  ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
  const std::vector<PendingReport> first = {{"c0", "share-c0"}, {"c1", "share-c1"}};
  ASSERT_THAT(store->PutPendingBatch(1, first).status(), IsOk());
  const std::vector<std::string> count = {"c0", "c1"};
  ASSERT_THAT(store->CommitBatch(1, "acc-c0-c1", count, {}), IsOk());

  // A writer uploads batches of 5 until told to stop; it keeps the ids of
  // the acknowledged batches and the errors of the others.
  std::atomic<int> acked_batches{0};
  std::atomic<bool> stop{false};
  std::vector<std::string> acked;
  std::vector<absl::Status> errors;
  std::thread writer([&] {
    for (int b = 0; !stop.load(); ++b) {
      std::vector<PendingReport> batch;
      for (int k = 0; k < 5; ++k) {
        const std::string id = absl::StrCat("b", b, "-", k);
        batch.push_back({id, absl::StrCat("share-", id)});
      }
      absl::StatusOr<std::vector<absl::Status>> out = store->PutPendingBatch(1, batch);
      if (out.ok()) {
        for (const PendingReport& r : batch) acked.push_back(r.report_id);
        ++acked_batches;
      } else {
        errors.push_back(out.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  });
  while (acked_batches.load() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_THAT(server->Crash(), IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  writer.join();
  ASSERT_FALSE(errors.empty());
  for (const absl::Status& e : errors) {
    EXPECT_THAT(e, StatusIs(absl::StatusCode::kUnavailable, Not(HasSubstr("share-"))));
  }

  ASSERT_THAT(server->Restart(), IsOk());  // crash recovery
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<ReportRecord> all,
                              store->ListReports(1, ReportFilter::kAll));
  std::set<std::string> stored;
  for (const ReportRecord& r : all) stored.insert(r.report_id);
  for (const std::string& id : acked) {
    ASSERT_TRUE(stored.count(id)) << "acknowledged report lost: " << id;
    TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, store->GetReport(id));
    EXPECT_EQ(r.share, absl::StrCat("share-", id));
  }
  // Beyond those, at most the one batch in flight at the crash (committed
  // but not acknowledged), and only whole.
  EXPECT_LE(stored.size(), acked.size() + 2 + 5);
  EXPECT_EQ((stored.size() - 2) % 5, 0u);
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-c0-c1");
  EXPECT_EQ(snap.report_count, 2);
}

}  // namespace
}  // namespace tandem::aggregator
