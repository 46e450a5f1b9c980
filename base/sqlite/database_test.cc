#include "base/sqlite/database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sqlite {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

// A fresh directory per test under the gtest temp dir, removed afterwards.
class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("tandem_sqlite_", getpid(), "_", info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(DatabaseTest, OpenAppliesWalAndFullSync) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement mode, db->Prepare("PRAGMA journal_mode"));
  ASSERT_THAT(mode.Step(), IsOkAndHolds(true));
  EXPECT_EQ(mode.ColumnText(0), "wal");
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement sync, db->Prepare("PRAGMA synchronous"));
  ASSERT_THAT(sync.Step(), IsOkAndHolds(true));
  EXPECT_EQ(sync.ColumnInt64(0), 2);  // FULL
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement busy, db->Prepare("PRAGMA busy_timeout"));
  ASSERT_THAT(busy.Step(), IsOkAndHolds(true));
  EXPECT_EQ(busy.ColumnInt64(0), 5000);
}

TEST_F(DatabaseTest, QueryOnlyConnectionReadsCommittedRowsAndCannotWrite) {
  EXPECT_THAT(Database::OpenQueryOnly(Path("missing.db"), {}).status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_FALSE(std::filesystem::exists(Path("missing.db")));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto writer, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(writer->Exec("CREATE TABLE t (x INTEGER)"), IsOk());
  ASSERT_THAT(writer->Exec("INSERT INTO t VALUES (7)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto reader, Database::OpenQueryOnly(Path("a.db"), {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement get, reader->Prepare("SELECT x FROM t"));
  ASSERT_THAT(get.Step(), IsOkAndHolds(true));
  EXPECT_EQ(get.ColumnInt64(0), 7);
  EXPECT_FALSE(reader->Exec("INSERT INTO t VALUES (8)").ok());
}

TEST_F(DatabaseTest, OpenRejectsBadArguments) {
  EXPECT_THAT(Database::Open("", {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  DatabaseOptions o;
  o.busy_timeout_ms = -1;
  EXPECT_THAT(Database::Open(Path("a.db"), o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("busy")));
}

TEST_F(DatabaseTest, OpenMissingWithoutCreateIsNotFound) {
  DatabaseOptions o;
  o.create_if_missing = false;
  EXPECT_THAT(Database::Open(Path("missing.db"), o), StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.db")));
}

TEST_F(DatabaseTest, OpenGarbageFileIsDataLoss) {
  {
    std::ofstream f(Path("junk.db"), std::ios::binary);
    f << std::string(4096, 'x');
  }
  EXPECT_THAT(Database::Open(Path("junk.db"), {}), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sqlite")));
}

TEST_F(DatabaseTest, TypedBindsRoundTrip) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n BLOB)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement ins, db->Prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)"));
  const std::vector<uint8_t> blob = {0, 1, 2, 255, 0};
  ASSERT_THAT(ins.BindInt64(1, -9007199254740993LL), IsOk());
  ASSERT_THAT(ins.BindDouble(2, 0.1), IsOk());
  ASSERT_THAT(ins.BindText(3, std::string("h\0i", 3)), IsOk());
  ASSERT_THAT(ins.BindBlob(4, absl::MakeConstSpan(blob)), IsOk());
  ASSERT_THAT(ins.BindNull(5), IsOk());
  ASSERT_THAT(ins.StepDone(), IsOk());
  EXPECT_EQ(db->ChangedRows(), 1);

  TANDEM_ASSERT_OK_AND_ASSIGN(Statement sel, db->Prepare("SELECT i, d, s, b, n FROM t"));
  ASSERT_THAT(sel.Step(), IsOkAndHolds(true));
  EXPECT_EQ(sel.ColumnCount(), 5);
  EXPECT_EQ(sel.ColumnInt64(0), -9007199254740993LL);
  EXPECT_EQ(sel.ColumnDouble(1), 0.1);
  EXPECT_EQ(sel.ColumnText(2), std::string("h\0i", 3));
  EXPECT_EQ(sel.ColumnBlob(3), std::string("\0\1\2\xff\0", 5));
  EXPECT_TRUE(sel.ColumnIsNull(4));
  EXPECT_FALSE(sel.ColumnIsNull(3));
  EXPECT_TRUE(sel.ColumnIsNull(99));
  EXPECT_EQ(sel.ColumnInt64(99), 0);
  EXPECT_THAT(sel.Step(), IsOkAndHolds(false));
}

TEST_F(DatabaseTest, EmptyBlobIsNotNull) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (b BLOB NOT NULL)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement ins, db->Prepare("INSERT INTO t VALUES (?1)"));
  ASSERT_THAT(ins.BindBlob(1, absl::string_view()), IsOk());
  EXPECT_THAT(ins.StepDone(), IsOk());
}

TEST_F(DatabaseTest, ResetAllowsReuse) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (i INTEGER)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement ins, db->Prepare("INSERT INTO t VALUES (?1)"));
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(ins.BindInt64(1, i), IsOk());
    ASSERT_THAT(ins.StepDone(), IsOk());
    ASSERT_THAT(ins.Reset(), IsOk());
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement sum, db->Prepare("SELECT sum(i), count(*) FROM t"));
  ASSERT_THAT(sum.Step(), IsOkAndHolds(true));
  EXPECT_EQ(sum.ColumnInt64(0), 45);
  EXPECT_EQ(sum.ColumnInt64(1), 10);
}

TEST_F(DatabaseTest, ErrorsAreMappedWithSqliteMessage) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  EXPECT_THAT(db->Exec("CREATE TABLEX"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("syntax error")));
  EXPECT_THAT(db->Prepare("SELECT * FROM nope"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no such table")));
  EXPECT_THAT(db->Prepare("SELECT 1; SELECT 2"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than one")));
  EXPECT_THAT(db->Prepare("   "), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  ASSERT_THAT(db->Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"), IsOk());
  ASSERT_THAT(db->Exec("INSERT INTO t VALUES (1, 'a')"), IsOk());
  EXPECT_THAT(db->Exec("INSERT INTO t VALUES (1, 'b')"), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("UNIQUE")));
  EXPECT_THAT(db->Exec("INSERT INTO t VALUES (2, NULL)"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("NOT NULL")));
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement st, db->Prepare("SELECT ?1"));
  EXPECT_THAT(st.BindInt64(2, 1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bind parameter 2")));
}

TEST(StatusCodeFromSqlite, MapsDocumentedCodes) {
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_OK), absl::StatusCode::kOk);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_BUSY), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_LOCKED), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_CORRUPT), absl::StatusCode::kDataLoss);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_FULL), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_READONLY), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_IOERR_FSYNC), absl::StatusCode::kInternal);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_CONSTRAINT_PRIMARYKEY), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(StatusCodeFromSqlite(SQLITE_CONSTRAINT_CHECK), absl::StatusCode::kFailedPrecondition);
}

TEST_F(DatabaseTest, TransactionCommitPersistsAndDestructorRollsBack) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (i INTEGER)"), IsOk());
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(Transaction tx, Transaction::Begin(db.get()));
    EXPECT_TRUE(db->InTransaction());
    EXPECT_THAT(Transaction::Begin(db.get()), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already")));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (1)"), IsOk());
    ASSERT_THAT(tx.Commit(), IsOk());
    EXPECT_THAT(tx.Commit(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("finished")));
  }
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(Transaction tx, Transaction::Begin(db.get(), TransactionMode::kDeferred));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (2)"), IsOk());
  }  // Rolled back here.
  EXPECT_FALSE(db->InTransaction());
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(Transaction tx, Transaction::Begin(db.get(), TransactionMode::kExclusive));
    ASSERT_THAT(db->Exec("INSERT INTO t VALUES (3)"), IsOk());
    ASSERT_THAT(tx.Rollback(), IsOk());
    EXPECT_THAT(tx.Rollback(), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  db.reset();
  TANDEM_ASSERT_OK_AND_ASSIGN(db, Database::Open(Path("a.db"), {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement sel, db->Prepare("SELECT group_concat(i) FROM t"));
  ASSERT_THAT(sel.Step(), IsOkAndHolds(true));
  EXPECT_EQ(sel.ColumnText(0), "1");
  EXPECT_THAT(Transaction::Begin(nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DatabaseTest, SecondWriterGetsUnavailableWhileLocked) {
  DatabaseOptions o;
  o.busy_timeout_ms = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, Database::Open(Path("a.db"), o));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, Database::Open(Path("a.db"), o));
  ASSERT_THAT(a->Exec("CREATE TABLE t (i INTEGER)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(Transaction tx, Transaction::Begin(a.get()));
  EXPECT_THAT(Transaction::Begin(b.get()), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("locked")));
  ASSERT_THAT(tx.Commit(), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(Transaction tx2, Transaction::Begin(b.get()));
  EXPECT_THAT(tx2.Commit(), IsOk());
}

TEST_F(DatabaseTest, CachedStatementsComeBackResetWithoutBindings) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (i INTEGER)"), IsOk());
  for (int i = 0; i < 3; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(CachedStatement ins,
                                db->PrepareCached("INSERT INTO t VALUES (?1)"));
    if (i < 2) ASSERT_THAT(ins->BindInt64(1, 10 + i), IsOk());  // the third binds nothing
    ASSERT_THAT(ins->StepDone(), IsOk());
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(Statement sel,
                              db->Prepare("SELECT group_concat(coalesce(i, 'null')) FROM t"));
  ASSERT_THAT(sel.Step(), IsOkAndHolds(true));
  EXPECT_EQ(sel.ColumnText(0), "10,11,null");
  EXPECT_THAT(db->PrepareCached("SELEC 1"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db->PrepareCached("SELECT 1; SELECT 2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than one")));
}

TEST_F(DatabaseTest, NestedUsesOfOneCachedTextAreIndependent) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(db->Exec("CREATE TABLE t (i INTEGER); INSERT INTO t VALUES (1), (2), (3)"), IsOk());
  constexpr absl::string_view kSql = "SELECT i FROM t WHERE i >= ?1 ORDER BY i";
  TANDEM_ASSERT_OK_AND_ASSIGN(CachedStatement outer, db->PrepareCached(kSql));
  ASSERT_THAT(outer->BindInt64(1, 2), IsOk());
  ASSERT_THAT(outer->Step(), IsOkAndHolds(true));
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(CachedStatement inner, db->PrepareCached(kSql));
    ASSERT_THAT(inner->BindInt64(1, 1), IsOk());
    ASSERT_THAT(inner->Step(), IsOkAndHolds(true));
    EXPECT_EQ(inner->ColumnInt64(0), 1);
  }
  EXPECT_EQ(outer->ColumnInt64(0), 2);  // untouched by the inner use
  ASSERT_THAT(outer->Step(), IsOkAndHolds(true));
  EXPECT_EQ(outer->ColumnInt64(0), 3);
}

// An unfinished SELECT left un-reset would keep its WAL read snapshot, and
// the connection's next query would miss later commits of another one.
TEST_F(DatabaseTest, ADroppedCachedSelectHoldsNoSnapshot) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto writer, Database::Open(Path("a.db"), {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto reader, Database::Open(Path("a.db"), {}));
  ASSERT_THAT(writer->Exec("CREATE TABLE t (i INTEGER); INSERT INTO t VALUES (1), (2)"), IsOk());
  constexpr absl::string_view kSql = "SELECT count(*) FROM t UNION ALL SELECT max(i) FROM t";
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(CachedStatement sel, reader->PrepareCached(kSql));
    ASSERT_THAT(sel->Step(), IsOkAndHolds(true));  // one row of two: unfinished
    EXPECT_EQ(sel->ColumnInt64(0), 2);
  }
  EXPECT_FALSE(reader->InTransaction());
  ASSERT_THAT(writer->Exec("INSERT INTO t VALUES (3)"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(CachedStatement again, reader->PrepareCached(kSql));
  ASSERT_THAT(again->Step(), IsOkAndHolds(true));
  EXPECT_EQ(again->ColumnInt64(0), 3);
}

}  // namespace
}  // namespace tandem::sqlite
