#include "aggregator/core/sqlite_store_factory.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregator/store/sqlite_report_store.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

StoreFactory MakeSqliteStoreFactory(std::string dir, sqlite::DatabaseOptions options) {
  return [dir = std::move(dir), options](
             absl::string_view task_id,
             bool create) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
    const std::string path = absl::StrCat(dir, "/task-", task_id, ".sqlite");
    std::error_code ec;
    if (!create && !std::filesystem::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("no state for task ", task_id));
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteReportStore> store,
                            SqliteReportStore::Open(path, options));
    return std::unique_ptr<ReportStore>(std::move(store));
  };
}

}  // namespace tandem::aggregator
