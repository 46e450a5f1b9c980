#include "server/store/task_store.h"

#include <sys/stat.h>

#include "base/status_macros.h"

namespace tandem::server {
namespace {

// seq keeps the creation order across replacements of a row.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS tasks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL UNIQUE, info BLOB NOT NULL);
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<TaskStore>> TaskStore::Open(const std::string& path) {
  sqlite::DatabaseOptions options;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> db,
                          sqlite::Database::Open(path, options));
  TANDEM_RETURN_IF_ERROR(db->Exec(kSchema));
  ::chmod(path.c_str(), 0600);
  return std::unique_ptr<TaskStore>(new TaskStore(std::move(db)));
}

absl::StatusOr<std::vector<proto::TaskInfo>> TaskStore::Load() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("SELECT info FROM tasks ORDER BY seq"));
  std::vector<proto::TaskInfo> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    proto::TaskInfo t;
    if (!t.ParseFromString(st.ColumnBlob(0)) || t.task_id().empty()) {
      return absl::DataLossError("a stored task record does not parse");
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status TaskStore::Put(const proto::TaskInfo& task) {
  if (task.task_id().empty()) return absl::InvalidArgumentError("task_id is empty");
  proto::TaskInfo stored = task;
  stored.clear_status();
  absl::MutexLock lock(&mu_);
  // UPSERT keeps the row's seq (INSERT OR REPLACE would move it last).
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("INSERT INTO tasks (task_id, info) VALUES (?1, ?2) "
                                       "ON CONFLICT(task_id) DO UPDATE SET info = excluded.info"));
  TANDEM_RETURN_IF_ERROR(st.BindText(1, stored.task_id()));
  TANDEM_RETURN_IF_ERROR(st.BindBlob(2, stored.SerializeAsString()));
  return st.StepDone();
}

}  // namespace tandem::server
