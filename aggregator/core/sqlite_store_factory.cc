#include "aggregator/core/sqlite_store_factory.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregator/store/segment_report_store.h"
#include "aggregator/store/sqlite_report_store.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

namespace {

constexpr absl::string_view kSegmentSuffix = ".segments";

bool HasSuffix(const std::string& name, absl::string_view suffix) {
  return name.size() > 5 + suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix.data(),
                      suffix.size()) == 0;
}

// Task state in `dir`: task-*.sqlite files and task-*.segments directories.
uint32_t CountTaskFiles(const std::string& dir) {
  uint32_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("task-", 0) == 0 &&
        (HasSuffix(name, ".sqlite") || HasSuffix(name, kSegmentSuffix))) {
      ++n;
    }
  }
  return n;
}

}  // namespace

StoreFactory MakeSqliteStoreFactory(std::string dir, sqlite::DatabaseOptions options,
                                    uint32_t max_tasks) {
  return [dir = std::move(dir), options, max_tasks](
             absl::string_view task_id,
             bool create) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
    const std::string path = absl::StrCat(dir, "/task-", task_id, ".sqlite");
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    if (!create && !exists) {
      return absl::NotFoundError(absl::StrCat("no state for task ", task_id));
    }
    if (!exists && max_tasks != 0 && CountTaskFiles(dir) >= max_tasks) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this aggregator already holds ", max_tasks, " tasks (max_tasks)"));
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteReportStore> store,
                            SqliteReportStore::Open(path, options));
    return std::unique_ptr<ReportStore>(std::move(store));
  };
}

StoreFactory MakeSegmentStoreFactory(std::string dir, sqlite::DatabaseOptions options,
                                     uint32_t max_tasks) {
  return [dir = std::move(dir), options, max_tasks](
             absl::string_view task_id,
             bool create) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
    const std::string path = absl::StrCat(dir, "/task-", task_id, kSegmentSuffix);
    std::error_code ec;
    const bool exists = std::filesystem::exists(path + "/index.sqlite", ec);
    if (!create && !exists) {
      return absl::NotFoundError(absl::StrCat("no state for task ", task_id));
    }
    // A directory left by an interrupted create is already counted.
    if (!std::filesystem::exists(path, ec) && max_tasks != 0 &&
        CountTaskFiles(dir) >= max_tasks) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this aggregator already holds ", max_tasks, " tasks (max_tasks)"));
    }
    SegmentStoreOptions segment_options;
    segment_options.sqlite = options;
    if (!options.create_if_missing && !exists) {
      return absl::NotFoundError(absl::StrCat("no state for task ", task_id));
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SegmentReportStore> store,
                            SegmentReportStore::Open(path, segment_options));
    return std::unique_ptr<ReportStore>(std::move(store));
  };
}

}  // namespace tandem::aggregator
