// Durable task registry of tandem-coordinator (tasks.db in its state
// directory): one row per task the coordinator ever ran, with its state
// (active, paused, deleted), origin and document (proto::TaskInfo without
// its live status). The tasks' rounds live in their own stores
// (coordinator_store.h); this table only says which tasks exist.
//
// What survives a restart (SIGKILL included): every committed Put. A
// deleted task's row stays, so that its id is never reused (the aggregators
// keep that task's rounds).
// Error codes: INVALID_ARGUMENT for a row without a task id, DATA_LOSS for a
// stored row that no longer parses, UNAVAILABLE/INTERNAL from SQLite.
// Thread safety: all methods are thread-safe (one internal mutex).
#ifndef TANDEM_SERVER_STORE_TASK_STORE_H_
#define TANDEM_SERVER_STORE_TASK_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/sqlite/database.h"
#include "proto/task_admin.pb.h"

namespace tandem::server {

class TaskStore {
 public:
  // Opens or creates `path` (WAL, synchronous=FULL), file mode 0600.
  static absl::StatusOr<std::unique_ptr<TaskStore>> Open(const std::string& path);

  // Every task, in creation order.
  absl::StatusOr<std::vector<proto::TaskInfo>> Load();
  // Inserts or replaces the task's row (its status is not stored).
  absl::Status Put(const proto::TaskInfo& task);

 private:
  explicit TaskStore(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}

  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_STORE_TASK_STORE_H_
