#include "aggregator/core/postgres_store_factory.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"

#ifdef TANDEM_WITH_POSTGRES
#include "aggregator/store/postgres_report_store.h"
#endif

namespace tandem::aggregator {

#ifdef TANDEM_WITH_POSTGRES

bool PostgresStoreBuiltIn() { return true; }

StoreFactory MakePostgresStoreFactory(std::string conninfo, uint32_t max_tasks,
                                      std::string replica_id, int64_t lease_ms) {
  return
      [conninfo = std::move(conninfo), max_tasks, replica_id = std::move(replica_id), lease_ms](
          absl::string_view task_id, bool create) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
        PostgresStoreOptions options;
        options.create_if_missing = create;
        options.max_tasks = max_tasks;
        options.replica_id = replica_id;
        options.lease_ms = lease_ms;
        if (!replica_id.empty()) {
          options.application_name = "tandem-aggregator " + replica_id;
        }
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<PostgresReportStore> store,
            PostgresReportStore::Open(conninfo, std::string(task_id), std::move(options)));
        return std::unique_ptr<ReportStore>(std::move(store));
      };
}

#else  // !TANDEM_WITH_POSTGRES

bool PostgresStoreBuiltIn() { return false; }

StoreFactory MakePostgresStoreFactory(std::string, uint32_t, std::string, int64_t) {
  return [](absl::string_view, bool) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
    return absl::FailedPreconditionError(
        "this binary was built without the PostgreSQL report store (TANDEM_WITH_POSTGRES=OFF)");
  };
}

#endif  // TANDEM_WITH_POSTGRES

}  // namespace tandem::aggregator
