// PostgresReportStore as several replicas' ReplicatedWork (report_store.h),
// against a real PostgreSQL server started by the test: disjoint claims,
// lease expiry and stealing, ownership checked by every transition, partial
// accumulators, adoption of another replica's uncounted reports, and the
// release of the partials' sum only while nothing changed.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "aggregator/store/postgres_report_store.h"
#include "aggregator/store/testing/postgres_server.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::PostgresServer;
using ::tandem::aggregator::testing::UniqueName;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Id(int i) { return absl::StrCat("report-", 100 + i); }

std::vector<std::string> Ids(const std::vector<ReportRecord>& records) {
  std::vector<std::string> out;
  for (const ReportRecord& r : records) out.push_back(r.report_id);
  return out;
}

class PostgresReplicaWorkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PostgresServer*> server = PostgresServer::Shared();
    ASSERT_THAT(server.status(), IsOk());
    server_ = *server;
    task_ = UniqueName("replicas");
  }

  std::unique_ptr<PostgresReportStore> Replica(const std::string& id, int64_t lease_ms = 60000) {
    PostgresStoreOptions options;
    options.replica_id = id;
    options.lease_ms = lease_ms;
    auto s = PostgresReportStore::Open(server_->conninfo(), task_, std::move(options));
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Round 1 open with `n` pending reports (uploaded through `store`).
  void Fill(ReportStore& store, int n) {
    ASSERT_THAT(store.OpenRound(1, "params"), IsOk());
    std::vector<PendingReport> reports;
    for (int i = 0; i < n; ++i) reports.push_back({Id(i), absl::StrCat("share-", i)});
    auto results = store.PutPendingBatch(1, reports);
    ASSERT_THAT(results.status(), IsOk());
    for (const absl::Status& s : *results) ASSERT_THAT(s, IsOk());
  }

  PostgresServer* server_ = nullptr;
  std::string task_;
};

TEST_F(PostgresReplicaWorkTest, OnlyStoresWithAReplicaIdShareWork) {
  auto plain = PostgresReportStore::Open(server_->conninfo(), task_);
  ASSERT_THAT(plain.status(), IsOk());
  EXPECT_EQ((*plain)->replicated(), nullptr);
  EXPECT_THAT((*plain)->ClaimPending(1, 4, false).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto a = Replica("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->replicated(), a.get());
  for (const char* bad : {"", "has space", "semi;colon", "quote'd"}) {
    PostgresStoreOptions options;
    options.replica_id = bad;
    if (std::string(bad).empty()) continue;  // empty = no replica
    EXPECT_THAT(PostgresReportStore::Open(server_->conninfo(), task_, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
  EXPECT_THAT(a->ClaimPending(1, 0, false).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(PostgresReplicaWorkTest, ConcurrentClaimsAreDisjointAndCoverEveryReport) {
  constexpr int kReports = 60;
  constexpr int kReplicas = 4;
  std::vector<std::unique_ptr<PostgresReportStore>> replicas;
  for (int i = 0; i < kReplicas; ++i) replicas.push_back(Replica(absl::StrCat("r", i)));
  Fill(*replicas[0], kReports);
  std::vector<std::vector<std::string>> got(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      while (true) {
        auto batch = replicas[i]->ClaimPending(1, 7, /*steal=*/false);
        ASSERT_THAT(batch.status(), IsOk());
        if (batch->empty()) return;
        EXPECT_TRUE(std::is_sorted(batch->begin(), batch->end(),
                                   [](const ReportRecord& x, const ReportRecord& y) {
                                     return x.report_id < y.report_id;
                                   }));
        for (const ReportRecord& r : *batch) {
          EXPECT_EQ(r.share, absl::StrCat("share-", std::stoi(r.report_id.substr(7)) - 100));
          got[i].push_back(r.report_id);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::multiset<std::string> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kReports));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), static_cast<size_t>(kReports));
}

TEST_F(PostgresReplicaWorkTest, AnExpiredLeaseIsTakenAndTheLateCommitRefused) {
  auto slow = Replica("slow", /*lease_ms=*/300);
  auto other = Replica("other");
  Fill(*slow, 5);
  auto mine = slow->ClaimPending(1, 10, false);
  ASSERT_THAT(mine.status(), IsOk());
  EXPECT_EQ(mine->size(), 5u);
  auto none = other->ClaimPending(1, 10, false);  // leased: skipped
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_THAT(*none, IsEmpty());
  absl::SleepFor(absl::Milliseconds(450));
  auto taken = other->ClaimPending(1, 10, false);
  ASSERT_THAT(taken.status(), IsOk());
  EXPECT_EQ(Ids(*taken), Ids(*mine));
  // The slow replica wakes up and commits what it no longer holds: refused,
  // whole (nothing changes), whatever the transition.
  const std::vector<std::string> ids = Ids(*mine);
  EXPECT_THAT(slow->CommitDecisions(1, {ids[0]}, {ids[1]}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(slow->CommitBatch(1, "acc", {ids[2]}, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto counts = slow->CountReports(1);
  ASSERT_THAT(counts.status(), IsOk());
  EXPECT_EQ(counts->pending, 5);
  // The holder commits.
  EXPECT_THAT(other->CommitDecisions(1, {ids[0], ids[2]}, {ids[1]}), IsOk());
  EXPECT_THAT(other->SaveAccumulator(1, "sum-0-2", {ids[0], ids[2]}), IsOk());
}

TEST_F(PostgresReplicaWorkTest, StealAndReleaseLeases) {
  auto a = Replica("a");
  auto b = Replica("b");
  Fill(*a, 4);
  auto held = a->ClaimPending(1, 4, false);
  ASSERT_THAT(held.status(), IsOk());
  ASSERT_EQ(held->size(), 4u);
  // Given back: claimable at once by another replica.
  EXPECT_THAT(a->ReleaseLeases(1, {Ids(*held)[0], Ids(*held)[1]}), IsOk());
  auto freed = b->ClaimPending(1, 4, false);
  ASSERT_THAT(freed.status(), IsOk());
  EXPECT_THAT(Ids(*freed), ElementsAre(Ids(*held)[0], Ids(*held)[1]));
  // Releasing leases one does not hold changes nothing.
  EXPECT_THAT(a->ReleaseLeases(1, Ids(*freed)), IsOk());
  auto still = a->ClaimPending(1, 4, false);
  ASSERT_THAT(still.status(), IsOk());
  EXPECT_THAT(*still, IsEmpty());
  // Finalize's last pass takes every pending report, leased or not.
  auto stolen = a->ClaimPending(1, 10, /*steal=*/true);
  ASSERT_THAT(stolen.status(), IsOk());
  EXPECT_EQ(stolen->size(), 4u);
  EXPECT_THAT(b->CommitDecisions(1, {Ids(*freed)[0]}, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(PostgresReplicaWorkTest, PartialsAdoptionAndTheReleaseOfTheirSum) {
  auto a = Replica("a");
  auto b = Replica("b");
  Fill(*a, 6);
  // Helper-style commits without claims: free pending reports.
  ASSERT_THAT(a->CommitBatch(1, "A1", {Id(0), Id(1)}, {}), IsOk());
  ASSERT_THAT(b->CommitBatch(1, "B1", {Id(2)}, {Id(3)}), IsOk());
  // The same report accepted by two replicas at once: the second is refused.
  ASSERT_THAT(a->CommitDecisions(1, {Id(4), Id(5)}, {}), IsOk());
  EXPECT_THAT(b->CommitDecisions(1, {Id(4)}, {}), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(b->SaveAccumulator(1, "B2", {Id(4)}),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  auto partial_a = a->LoadAccumulator(1);
  ASSERT_THAT(partial_a.status(), IsOk());
  EXPECT_EQ(partial_a->bytes, "A1");
  EXPECT_EQ(partial_a->report_count, 2);
  auto uncounted_a = a->ListReports(1, ReportFilter::kAcceptedUncounted);
  ASSERT_THAT(uncounted_a.status(), IsOk());
  EXPECT_THAT(Ids(*uncounted_a), ElementsAre(Id(4), Id(5)));
  auto uncounted_b = b->ListReports(1, ReportFilter::kAcceptedUncounted);
  ASSERT_THAT(uncounted_b.status(), IsOk());
  EXPECT_THAT(*uncounted_b, IsEmpty());

  // Not releasable while reports are accepted but uncounted, nor with a
  // count that is not the counted reports'.
  EXPECT_THAT(b->ReleaseSummed(1, "sum", 3), StatusIs(absl::StatusCode::kAborted));
  // b finalizes: adopts a's uncounted reports (with their shares).
  auto adopted = b->AdoptUncounted(1);
  ASSERT_THAT(adopted.status(), IsOk());
  EXPECT_THAT(Ids(*adopted), ElementsAre(Id(4), Id(5)));
  EXPECT_EQ((*adopted)[0].share, "share-4");
  // a's checkpoint of them now fails whole; b's succeeds.
  EXPECT_THAT(a->SaveAccumulator(1, "A2", {Id(4), Id(5)}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(b->SaveAccumulator(1, "B2", {Id(4), Id(5)}), IsOk());
  auto partials = a->ListPartials(1);
  ASSERT_THAT(partials.status(), IsOk());
  ASSERT_EQ(partials->size(), 2u);
  EXPECT_EQ((*partials)[0].replica_id, "a");
  EXPECT_EQ((*partials)[0].bytes, "A1");
  EXPECT_EQ((*partials)[0].report_count, 2);
  EXPECT_EQ((*partials)[1].replica_id, "b");
  EXPECT_EQ((*partials)[1].bytes, "B2");
  EXPECT_EQ((*partials)[1].report_count, 3);
  EXPECT_EQ((*partials)[1].version, 2);

  EXPECT_THAT(b->ReleaseSummed(1, "sum", 4),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("5 counted (summed 4)")));
  ASSERT_THAT(b->ReleaseSummed(1, "sum-of-5", 5), IsOk());
  // Released: every replica reads the released share and the whole count;
  // nothing more is committed or released.
  for (PostgresReportStore* s : {a.get(), b.get()}) {
    auto released = s->LoadAccumulator(1);
    ASSERT_THAT(released.status(), IsOk());
    EXPECT_EQ(released->bytes, "sum-of-5");
    EXPECT_EQ(released->report_count, 5);
    auto round = s->GetRound(1);
    ASSERT_THAT(round.status(), IsOk());
    EXPECT_EQ(round->state, RoundState::kReleased);
  }
  EXPECT_THAT(a->ReleaseSummed(1, "again", 5), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(a->CommitBatch(1, "x", {}, {Id(3)}), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace tandem::aggregator
