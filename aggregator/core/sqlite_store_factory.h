// StoreFactory over one SQLite file per task: <dir>/task-<task_id>.sqlite.
// Task ids are validated by the Aggregator ([A-Za-z0-9._-]{1,64}) before
// the factory sees them, so they are safe as file name components.
#ifndef TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_
#define TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_

#include <string>

#include "aggregator/core/aggregator.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

// NOT_FOUND for a missing file when create_if_missing is false; otherwise
// the errors of SqliteReportStore::Open.
StoreFactory MakeSqliteStoreFactory(std::string dir, sqlite::DatabaseOptions options = {});

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_SQLITE_STORE_FACTORY_H_
