// StoreFactory over one SQLite file per task: <dir>/task-<task_id>.sqlite
// (or, with MakeSegmentStoreFactory, one segment store directory per task).
// Task ids are validated by the Aggregator ([A-Za-z0-9._-]{1,64}) before
// the factory sees them, so they are safe as file name components.
#ifndef TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_
#define TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_

#include <string>

#include "aggregator/core/aggregator.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

// NOT_FOUND for a missing file when create_if_missing is false;
// RESOURCE_EXHAUSTED when creating one more task file would exceed
// `max_tasks` task files in `dir` (0 = no limit; counted on disk, so the
// limit holds across restarts); otherwise the errors of
// SqliteReportStore::Open. Thread-compatible: the Aggregator calls it under
// its own synchronisation per task id.
StoreFactory MakeSqliteStoreFactory(std::string dir, sqlite::DatabaseOptions options = {},
                                    uint32_t max_tasks = 0);

// Like MakeSqliteStoreFactory, but each task's store is a SegmentReportStore
// (aggregator/store/segment_report_store.h: shares in append-only segment
// files, SQLite as the index) in the directory <dir>/task-<task_id>.segments.
// `max_tasks` counts both kinds of task state in `dir`. Not the default: the
// daemon keeps MakeSqliteStoreFactory unless told otherwise.
StoreFactory MakeSegmentStoreFactory(std::string dir, sqlite::DatabaseOptions options = {},
                                     uint32_t max_tasks = 0);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_
