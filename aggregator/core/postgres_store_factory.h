// StoreFactory over one PostgreSQL database shared by every task -- and by
// several aggregator replicas of one operator: each task's store is a
// PostgresReportStore (aggregator/store/postgres_report_store.h) keyed by
// the task id in the same tables. Selected by the daemon's
// postgres_conninfo (proto/config.proto); the default stays the embedded
// SQLite store (sqlite_store_factory.h).
#ifndef TANDEM_AGGREGATOR_CORE_POSTGRES_STORE_FACTORY_H_
#define TANDEM_AGGREGATOR_CORE_POSTGRES_STORE_FACTORY_H_

#include <cstdint>
#include <string>

#include "aggregator/core/aggregator.h"

namespace tandem::aggregator {

// True when this binary was built with the PostgreSQL store
// (CMake option TANDEM_WITH_POSTGRES, libpq).
bool PostgresStoreBuiltIn();

// Stores in the database at `conninfo` (a libpq connection string or URI;
// it may hold a password: never log it). NOT_FOUND "no state for task" for
// an unknown task when create_if_missing is false; RESOURCE_EXHAUSTED when
// creating one more task would exceed `max_tasks` tasks in the database
// (0 = no limit; counted in the database, so the limit holds across
// restarts and replicas); otherwise the errors of PostgresReportStore::Open
// (UNAVAILABLE while the server cannot be reached). Without
// PostgresStoreBuiltIn() every call is FAILED_PRECONDITION. A non-empty
// `replica_id` makes every store this replica's view (ReplicatedWork, with
// leases of `lease_ms`); empty: the only aggregator on the database.
StoreFactory MakePostgresStoreFactory(std::string conninfo, uint32_t max_tasks = 0,
                                      std::string replica_id = "", int64_t lease_ms = 30000);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_POSTGRES_STORE_FACTORY_H_
