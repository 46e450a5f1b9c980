// SQLite-specific behaviour: persistence, schema versions, corruption.
#include "aggregator/store/sqlite_report_store.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/sqlite/database.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

class SqliteReportStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("tandem_sqlstore_", getpid(), "_", info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "store.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs raw SQL on the file behind the store's back (to simulate corruption).
  void Tamper(const std::string& sql) {
    auto db = sqlite::Database::Open(path_, {});
    ASSERT_THAT(db.status(), IsOk());
    ASSERT_THAT((*db)->Exec(sql), IsOk());
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SqliteReportStoreTest, StateSurvivesReopen) {
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
    ASSERT_THAT(store->OpenRound(4, "p"), IsOk());
    ASSERT_THAT(store->PutPending(4, "a", "sa"), IsOk());
    ASSERT_THAT(store->PutPending(4, "b", "sb"), IsOk());
    ASSERT_THAT(store->MarkAccepted("a"), IsOk());
    ASSERT_THAT(store->MarkAccepted("b"), IsOk());
    ASSERT_THAT(store->SaveAccumulator(4, "acc", std::vector<std::string>{"a"}), IsOk());
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
  TANDEM_ASSERT_OK_AND_ASSIGN(const AccumulatorSnapshot snap, store->LoadAccumulator(4));
  EXPECT_EQ(snap.bytes, "acc");
  EXPECT_EQ(snap.report_count, 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto uncounted, store->ListReports(4, ReportFilter::kAcceptedUncounted));
  ASSERT_EQ(uncounted.size(), 1u);
  EXPECT_EQ(uncounted[0].report_id, "b");
  EXPECT_EQ(uncounted[0].share, "sb");  // Kept for re-accumulation after a crash.
  EXPECT_THAT(store->PutPending(4, "a", "other"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
}

TEST_F(SqliteReportStoreTest, RecordsSchemaVersion) {
  { TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_)); }
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, sqlite::Database::Open(path_, {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(sqlite::Statement st, db->Prepare("SELECT version FROM schema_version WHERE component = 'report_store'"));
  ASSERT_THAT(st.Step(), ::tandem::testing::IsOkAndHolds(true));
  EXPECT_EQ(st.ColumnInt64(0), SqliteReportStore::kSchemaVersion);
}

TEST_F(SqliteReportStoreTest, RoundSecretSurvivesReopenAndVersionOneMigrates) {
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
    ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
    ASSERT_THAT(store->BindRoundSecret(1, "first"), ::tandem::testing::IsOkAndHolds("first"));
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
  EXPECT_THAT(store->BindRoundSecret(1, "second"), ::tandem::testing::IsOkAndHolds("first"));
  store.reset();
  // A version-1 file (no secrets table) opens, migrates and works.
  Tamper("DROP TABLE round_secrets");
  Tamper("UPDATE schema_version SET version = 1");
  TANDEM_ASSERT_OK_AND_ASSIGN(store, SqliteReportStore::Open(path_));
  EXPECT_THAT(store->BindRoundSecret(1, "after-migration"),
              ::tandem::testing::IsOkAndHolds("after-migration"));
  store.reset();
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, sqlite::Database::Open(path_, {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      sqlite::Statement st,
      db->Prepare("SELECT version FROM schema_version WHERE component = 'report_store'"));
  ASSERT_THAT(st.Step(), ::tandem::testing::IsOkAndHolds(true));
  EXPECT_EQ(st.ColumnInt64(0), 2);
}

TEST_F(SqliteReportStoreTest, RefusesNewerSchema) {
  { TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_)); }
  Tamper("UPDATE schema_version SET version = 99");
  EXPECT_THAT(SqliteReportStore::Open(path_), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
  Tamper("UPDATE schema_version SET version = 0");
  EXPECT_THAT(SqliteReportStore::Open(path_), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("schema_version")));
}

TEST_F(SqliteReportStoreTest, GarbageFileIsDataLoss) {
  { std::ofstream(path_, std::ios::binary) << std::string(8192, '\x5a'); }
  EXPECT_THAT(SqliteReportStore::Open(path_), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
}

// Shares of PREAMBLE uploads are StoredReportShares whose digest is the
// content digest v2 (report_store.h ShareDigest); a store written before
// it kept SHA-256 of the same blobs, and those rows still read back. A
// tampered blob fails either way.
TEST_F(SqliteReportStoreTest, ContentDigestsAndOlderSha256DigestsBothCheckTheBlob) {
  proto::StoredReportShare stored;
  proto::BlockDpfKey* key = stored.mutable_key_share()->add_keys();
  key->set_seed(std::string(16, '\x01'));
  key->set_value_correction_packed(std::string(64, '\x02'));
  stored.mutable_key_share()->set_num_groups(1);
  stored.set_ticket_digest(std::string(32, '\x03'));
  const std::string blob = stored.SerializeAsString();
  ASSERT_NE(ShareDigest(blob), crypto::Sha256Digest(blob));  // read as a content digest
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
    ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
    ASSERT_THAT(store->PutPending(1, "v2", blob), IsOk());
    const std::vector<PendingReport> older = {{"old", blob, crypto::Sha256Digest(blob)},
                                              {"bad", blob, crypto::Sha256Digest(blob)}};
    TANDEM_ASSERT_OK_AND_ASSIGN(auto statuses, store->PutPendingBatch(1, older));
    for (const absl::Status& st : statuses) ASSERT_THAT(st, IsOk());
  }
  std::string tampered = blob;
  tampered.back() ^= 1;
  Tamper(absl::StrCat("UPDATE reports SET share = x'", absl::BytesToHexString(tampered),
                      "' WHERE report_id = CAST('bad' AS BLOB)"));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord v2, store->GetReport("v2"));
  EXPECT_EQ(v2.share_digest, ShareDigest(blob));
  EXPECT_EQ(v2.share, blob);
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord old, store->GetReport("old"));
  EXPECT_EQ(old.share, blob);
  EXPECT_THAT(store->GetReport("bad"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("digest mismatch")));
}

TEST_F(SqliteReportStoreTest, CorruptRowsAreDataLoss) {
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
    ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
    for (const char* id : {"a", "b", "c", "d"}) ASSERT_THAT(store->PutPending(1, id, "share"), IsOk());
    ASSERT_THAT(store->MarkAccepted("d"), IsOk());
    ASSERT_THAT(store->SaveAccumulator(1, "acc", std::vector<std::string>{"d"}), IsOk());
  }
  Tamper("UPDATE reports SET state = 7 WHERE report_id = CAST('a' AS BLOB)");
  Tamper("UPDATE reports SET share = CAST('tampered' AS BLOB) WHERE report_id = CAST('b' AS BLOB)");
  Tamper("UPDATE reports SET share_digest = x'00' WHERE report_id = CAST('c' AS BLOB)");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_));
  EXPECT_THAT(store->GetReport("a"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("state")));
  EXPECT_THAT(store->GetReport("b"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("digest mismatch")));
  EXPECT_THAT(store->GetReport("c"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("digest")));
  EXPECT_THAT(store->ListReports(1, ReportFilter::kAll), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
  EXPECT_THAT(store->MarkAccepted("a"), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
  EXPECT_THAT(store->LoadAccumulator(1), IsOk());
  Tamper("UPDATE accumulators SET report_count = 5");
  EXPECT_THAT(store->LoadAccumulator(1), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("report count")));
  Tamper("UPDATE rounds SET state = 3");
  EXPECT_THAT(store->GetRound(1), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("round state")));
}

TEST_F(SqliteReportStoreTest, TwoConnectionsShareState) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, SqliteReportStore::Open(path_));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, SqliteReportStore::Open(path_));
  ASSERT_THAT(a->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(a->PutPending(1, "r", "s"), IsOk());
  EXPECT_THAT(b->PutPending(1, "r", "different"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("replay")));
  EXPECT_THAT(b->MarkAccepted("r"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord r, a->GetReport("r"));
  EXPECT_EQ(r.state, ReportState::kAccepted);
}

// An upload's duplicate check (GetReportStates) reads the committed state
// through its own connection: it does not wait behind a writer that holds
// the store's lock, here one stuck on another process's write lock (as an
// upload waits behind a group commit's fsync).
TEST_F(SqliteReportStoreTest, StateReadsDoNotWaitForAWriterInProgress) {
  sqlite::DatabaseOptions options;
  options.busy_timeout_ms = 30000;  // the blocked writer waits this long at most
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, SqliteReportStore::Open(path_, options));
  ASSERT_THAT(store->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store->PutPending(1, "committed", "s"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto other, sqlite::Database::Open(path_, {}));
  ASSERT_THAT(other->Exec("BEGIN IMMEDIATE"), IsOk());  // the file's write lock
  std::atomic<bool> writer_done{false};
  std::thread writer([&] {
    EXPECT_THAT(store->PutPending(1, "blocked", "s"), IsOk());  // waits for `other`
    writer_done = true;
  });
  absl::SleepFor(absl::Milliseconds(300));  // the writer is inside PutPending by now
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const auto states, store->GetReportStates(std::vector<std::string>{"committed", "blocked"}));
  EXPECT_FALSE(writer_done.load()) << "the state read waited for the writer";
  EXPECT_EQ(states.size(), 1u);
  EXPECT_TRUE(states.contains("committed"));
  ASSERT_THAT(other->Exec("COMMIT"), IsOk());
  writer.join();
  EXPECT_TRUE(writer_done.load());
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto after,
                              store->GetReportStates(std::vector<std::string>{"blocked"}));
  EXPECT_TRUE(after.contains("blocked"));
}

}  // namespace
}  // namespace tandem::aggregator
