// PostgresReportStore against a real PostgreSQL server started by the test
// (aggregator/store/testing/postgres_server.h): schema migrations, several
// store objects (as replicas) on one task, and faults -- a backend killed
// before COMMIT, the server restarted during a round. The ReportStore
// contract itself is checked by report_store_test.cc.
#include "aggregator/store/postgres_report_store.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
using ::testing::HasSubstr;

class PostgresReportStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PostgresServer*> server = PostgresServer::Shared();
    ASSERT_THAT(server.status(), IsOk());
    server_ = *server;
  }

  std::unique_ptr<PostgresReportStore> OpenStore(const std::string& task,
                                                 PostgresStoreOptions options = {},
                                                 const std::string& conninfo = "") {
    auto s = PostgresReportStore::Open(conninfo.empty() ? server_->conninfo() : conninfo, task,
                                       std::move(options));
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::string Query(const std::string& sql, const std::string& db = "tandem_test") {
    absl::StatusOr<std::string> r = server_->Query(sql, db);
    EXPECT_THAT(r.status(), IsOk()) << sql;
    return r.ok() ? *r : "<error>";
  }

  PostgresServer* server_ = nullptr;
};

TEST_F(PostgresReportStoreTest, SchemaMigrationIsVersionedAndIdempotent) {
  const std::string db = UniqueName("migrate");
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string conninfo, server_->CreateDatabase(db));
  const std::string versions =
      "SELECT string_agg(version::text, ',' ORDER BY version) FROM tandem_schema_version";
  auto a = OpenStore("task-a", {}, conninfo);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(Query(versions, db), "1,2,3");
  auto b = OpenStore("task-b", {}, conninfo);  // again: nothing to apply
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Query(versions, db), "1,2,3");

  // A database left at version 1 gets steps 2 and 3 (and only them).
  Query("DROP TABLE tandem_round_secrets; DROP TABLE tandem_partials; ALTER TABLE tandem_reports "
        "DROP COLUMN owner, DROP COLUMN lease_expires; DELETE FROM tandem_schema_version WHERE "
        "version > 1",
        db);
  auto c = OpenStore("task-c", {}, conninfo);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Query(versions, db), "1,2,3");
  ASSERT_THAT(c->OpenRound(1, "p"), IsOk());
  EXPECT_THAT(c->BindRoundSecret(1, "seed"), ::tandem::testing::IsOkAndHolds("seed"));

  // A newer schema than this binary knows is refused.
  Query("INSERT INTO tandem_schema_version (version) VALUES (4)", db);
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "task-d").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
}

TEST_F(PostgresReportStoreTest, ConcurrentOpensMigrateOnce) {
  const std::string db = UniqueName("concurrent");
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string conninfo, server_->CreateDatabase(db));
  constexpr int kReplicas = 8;
  std::vector<absl::Status> results(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      // Half open the same task, half their own.
      auto s = PostgresReportStore::Open(conninfo, i % 2 == 0 ? "shared" : absl::StrCat("own-", i));
      results[i] = s.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_THAT(s, IsOk());
  EXPECT_EQ(Query("SELECT string_agg(version::text, ',' ORDER BY version) FROM "
                  "tandem_schema_version",
                  db),
            "1,2,3");
  EXPECT_EQ(Query("SELECT count(*) FROM tandem_tasks", db), "5");  // shared + 4 own
}

TEST_F(PostgresReportStoreTest, CreateIfMissingAndMaxTasks) {
  const std::string db = UniqueName("tasks");
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string conninfo, server_->CreateDatabase(db));
  PostgresStoreOptions no_create;
  no_create.create_if_missing = false;
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "a", no_create).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no state for task a")));
  PostgresStoreOptions limited;
  limited.max_tasks = 2;
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "a", limited).status(), IsOk());
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "b", limited).status(), IsOk());
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "c", limited).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_tasks")));
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "a", limited).status(), IsOk());  // known
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "b", no_create).status(), IsOk());
  EXPECT_THAT(PostgresReportStore::Open(conninfo, "", {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(PostgresReportStoreTest, TwoReplicasShareReportsAndRefuseReplays) {
  const std::string task = UniqueName("task");
  auto a = OpenStore(task);
  auto b = OpenStore(task);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_THAT(a->OpenRound(1, "params-1"), IsOk());
  EXPECT_THAT(b->OpenRound(1, "params-1"), IsOk());
  EXPECT_THAT(b->OpenRound(1, "other"), StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_THAT(a->PutPending(1, "r1", "share-1"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, b->GetReport("r1"));
  EXPECT_EQ(r.share, "share-1");
  EXPECT_EQ(r.share_digest, ShareDigest("share-1"));
  EXPECT_THAT(b->PutPending(1, "r1", "share-1"), IsOk());  // idempotent across replicas
  EXPECT_THAT(b->PutPending(1, "r1", "forged"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
  const std::vector<PendingReport> batch = {{"r2", "share-2"}, {"r1", "forged"}};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<absl::Status> out, b->PutPendingBatch(1, batch));
  EXPECT_THAT(out[0], IsOk());
  EXPECT_THAT(out[1], StatusIs(absl::StatusCode::kAlreadyExists));

  // One replica decides, the other sees the accumulator it wrote.
  const std::vector<std::string> count = {"r1"}, reject = {"r2"};
  ASSERT_THAT(b->CommitBatch(1, "acc-r1", count, reject), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, a->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "acc-r1");
  EXPECT_EQ(snap.report_count, 1);
  EXPECT_EQ(snap.version, 1);
  EXPECT_THAT(a->MarkAccepted("r2"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no longer pending")));

  // A replay in a later round through the other replica is refused.
  ASSERT_THAT(a->CloseRound(1), IsOk());
  ASSERT_THAT(a->OpenRound(2, "params-2"), IsOk());
  EXPECT_THAT(b->PutPending(2, "r1", "share-1"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
  EXPECT_THAT(b->PutPending(1, "r3", "s"), StatusIs(absl::StatusCode::kFailedPrecondition));

  // Tasks are separate: the same ids in another task are other reports.
  auto other = OpenStore(UniqueName("other"));
  ASSERT_NE(other, nullptr);
  ASSERT_THAT(other->OpenRound(1, "x"), IsOk());
  ASSERT_THAT(other->PutPending(1, "r1", "other-share"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(r, other->GetReport("r1"));
  EXPECT_EQ(r.share, "other-share");
  TANDEM_ASSERT_OK_AND_ASSIGN(r, a->GetReport("r1"));
  EXPECT_TRUE(r.counted);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<RoundRecord> rounds, other->ListRounds());
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].parameters, "x");
}

TEST_F(PostgresReportStoreTest, ConcurrentReplicasUploadTheSameReportsOnce) {
  const std::string task = UniqueName("task");
  constexpr int kReplicas = 4;
  std::vector<std::unique_ptr<PostgresReportStore>> stores;
  for (int i = 0; i < kReplicas; ++i) stores.push_back(OpenStore(task));
  for (const auto& s : stores) ASSERT_NE(s, nullptr);
  ASSERT_THAT(stores[0]->OpenRound(1, "p"), IsOk());
  // Every replica uploads ids 0..59 (identical content) in its own order;
  // replica i also sends id "c<k>" with content "from-i" (only one wins).
  std::vector<std::vector<absl::Status>> answers(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      for (int start = 0; start < 60; start += 20) {
        std::vector<PendingReport> batch;
        for (int k = 0; k < 20; ++k) {
          const int id = (start + k + 17 * i) % 60;
          batch.push_back({absl::StrCat("r", id), absl::StrCat("share-", id)});
        }
        batch.push_back({absl::StrCat("c", start), absl::StrCat("from-", i)});
        auto out = stores[i]->PutPendingBatch(1, batch);
        ASSERT_THAT(out.status(), IsOk());
        answers[i].insert(answers[i].end(), out->begin(), out->end());
      }
    });
  }
  for (auto& t : threads) t.join();
  int conflicts_won = 0;
  for (int i = 0; i < kReplicas; ++i) {
    ASSERT_EQ(answers[i].size(), 63u);
    for (size_t k = 0; k < answers[i].size(); ++k) {
      if (k % 21 != 20) {
        EXPECT_THAT(answers[i][k], IsOk());
      } else if (answers[i][k].ok()) {
        ++conflicts_won;
      } else {
        EXPECT_THAT(answers[i][k], StatusIs(absl::StatusCode::kAlreadyExists));
      }
    }
  }
  EXPECT_EQ(conflicts_won, 3);  // one replica per conflicting id
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts counts, stores[1]->CountReports(1));
  EXPECT_EQ(counts.pending, 63);
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, stores[2]->GetReport("r42"));
  EXPECT_EQ(r.share, "share-42");
}

TEST_F(PostgresReportStoreTest, BindRoundSecretFirstWinsAcrossConnections) {
  const std::string task = UniqueName("task");
  constexpr int kReplicas = 6;
  std::vector<std::unique_ptr<PostgresReportStore>> stores;
  for (int i = 0; i < kReplicas; ++i) stores.push_back(OpenStore(task));
  for (const auto& s : stores) ASSERT_NE(s, nullptr);
  ASSERT_THAT(stores[0]->OpenRound(7, "p"), IsOk());
  std::vector<absl::StatusOr<std::string>> got(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back(
        [&, i] { got[i] = stores[i]->BindRoundSecret(7, absl::StrCat("seed-", i)); });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> seen;
  for (const auto& g : got) {
    ASSERT_THAT(g.status(), IsOk());
    seen.insert(*g);
  }
  ASSERT_EQ(seen.size(), 1u);  // every replica got the same secret...
  const std::string winner = *seen.begin();
  EXPECT_THAT(winner, ::testing::MatchesRegex("seed-[0-5]"));  // ...one of those offered
  EXPECT_EQ(Query(absl::StrCat("SELECT count(*) FROM tandem_round_secrets WHERE task_id = '", task,
                               "' AND round_id = 7")),
            "1");
  // Later, from a new connection, also after the round closed.
  auto late = OpenStore(task);
  ASSERT_NE(late, nullptr);
  ASSERT_THAT(late->CloseRound(7), IsOk());
  EXPECT_THAT(late->BindRoundSecret(7, "seed-late"), ::tandem::testing::IsOkAndHolds(winner));
}

TEST_F(PostgresReportStoreTest, RowsThatFailValidationAreDataLoss) {
  const std::string task = UniqueName("task");
  auto s = OpenStore(task);
  ASSERT_NE(s, nullptr);
  ASSERT_THAT(s->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(s->PutPending(1, "a", "share-a"), IsOk());
  Query(absl::StrCat("UPDATE tandem_reports SET share = '\\x00'::bytea WHERE task_id = '", task,
                     "'"));
  EXPECT_THAT(s->GetReport("a"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("digest")));
  Query(absl::StrCat("UPDATE tandem_rounds SET state = 9 WHERE task_id = '", task, "'"));
  EXPECT_THAT(s->GetRound(1), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("round state")));
}

}  // namespace
}  // namespace tandem::aggregator
