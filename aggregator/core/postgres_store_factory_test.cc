// MakePostgresStoreFactory against a real PostgreSQL server started by the
// test (aggregator/store/testing/postgres_server.h).
#include "aggregator/core/postgres_store_factory.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "aggregator/store/testing/postgres_server.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::PostgresServer;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PostgresStoreFactoryTest, TasksShareOneDatabaseWithinMaxTasks) {
  ASSERT_TRUE(PostgresStoreBuiltIn());
  TANDEM_ASSERT_OK_AND_ASSIGN(PostgresServer * server, PostgresServer::Shared());
  static int n = 0;  // a fresh database, also under --gtest_repeat
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::string conninfo,
                              server->CreateDatabase(absl::StrCat("factory_", ++n)));
  StoreFactory factory = MakePostgresStoreFactory(conninfo, /*max_tasks=*/2);
  EXPECT_THAT(factory("task-a", false).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no state for task task-a")));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> a, factory("task-a", true));
  ASSERT_THAT(a->OpenRound(1, "params-a"), IsOk());
  ASSERT_THAT(a->PutPending(1, "r1", "share-a"), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> b, factory("task-b", true));
  EXPECT_THAT(factory("task-c", true).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_tasks")));
  // A restarted daemon (or another replica) reopens the task and finds its
  // state; the other task does not see it.
  TANDEM_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReportStore> again, factory("task-a", false));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord r, again->GetReport("r1"));
  EXPECT_EQ(r.share, "share-a");
  EXPECT_THAT(b->GetReport("r1"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(b->GetRound(1), StatusIs(absl::StatusCode::kNotFound));
}

TEST(PostgresStoreFactoryTest, AnUnreachableServerIsUnavailable) {
  StoreFactory factory =
      MakePostgresStoreFactory("host=127.0.0.1 port=1 dbname=none connect_timeout=2");
  EXPECT_THAT(factory("task-a", true).status(), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace tandem::aggregator
