// Test-only: a StoreFactory of in-memory report stores (one per task, made
// on first use with create = true; NOT_FOUND for an unknown task otherwise),
// for Aggregator unit tests that need no durable store.
#ifndef TANDEM_AGGREGATOR_TESTING_IN_MEMORY_STORE_FACTORY_H_
#define TANDEM_AGGREGATOR_TESTING_IN_MEMORY_STORE_FACTORY_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/store/in_memory_report_store.h"

namespace tandem::aggregator::testing {

inline StoreFactory InMemoryFactory() {
  auto known = std::make_shared<std::map<std::string, bool>>();
  return
      [known](absl::string_view task, bool create) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
        if (!create && !known->count(std::string(task))) return absl::NotFoundError("no task");
        (*known)[std::string(task)] = true;
        return std::unique_ptr<ReportStore>(new InMemoryReportStore());
      };
}

}  // namespace tandem::aggregator::testing

#endif  // TANDEM_AGGREGATOR_TESTING_IN_MEMORY_STORE_FACTORY_H_
