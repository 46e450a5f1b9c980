// The schema and row helpers of PostgresReportStore (see its header): the
// versioned migrations, task registration, row decoding and the batched
// report transitions. Free functions over a caller-owned connection; the
// caller holds its own lock and validates its arguments.
#ifndef TANDEM_AGGREGATOR_STORE_POSTGRES_ROWS_H_
#define TANDEM_AGGREGATOR_STORE_POSTGRES_ROWS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "aggregator/store/postgres_connection.h"
#include "aggregator/store/report_store.h"
#include "aggregator/store/report_transition.h"

namespace tandem::aggregator {

// Migration steps this binary knows (tandem_schema_version's last row).
inline constexpr int64_t kPostgresSchemaSteps = 3;

// The columns DecodeReport reads, in its order.
inline constexpr absl::string_view kReportColumns =
    "report_id, round_id, state, counted, share_digest, share";

// Applies the missing migration steps in one transaction under an advisory
// lock (replicas starting together migrate once), one tandem_schema_version
// row per step. FAILED_PRECONDITION for a schema newer than this binary's.
absl::Status MigratePostgresSchema(pg::Connection& conn);

// Registers `task_id` in tandem_tasks (under an advisory lock). NOT_FOUND
// "no state for task" for an unknown task unless create_if_missing;
// RESOURCE_EXHAUSTED when the database already holds `max_tasks` tasks
// (0 = no limit).
absl::Status RegisterPostgresTask(pg::Connection& conn, const std::string& task_id,
                                  bool create_if_missing, uint32_t max_tasks);

// Row `i` of a reports query (kReportColumns), validated (DATA_LOSS).
absl::StatusOr<ReportRecord> DecodeReport(const pg::Result& res, int i);
// Row `i` of a (parameters, state) rounds query, validated (DATA_LOSS).
absl::StatusOr<RoundRecord> DecodeRound(const pg::Result& res, int i, int64_t round_id);
// Row 0 of an accumulator query with the columns (bytes, report_count,
// version, number of reports counted in it): the snapshot (bytes NULL: none
// saved yet), DATA_LOSS "report store: corrupt <what> ..." when its
// counters are invalid or disagree with the counted reports.
absl::StatusOr<AccumulatorSnapshot> DecodeSnapshot(const pg::Result& res, int64_t round_id,
                                                   absl::string_view what);
// The WHERE condition selecting `filter`'s reports.
absl::string_view FilterSql(ReportFilter filter);

// sqlite_rounds.h's ApplyTransition on tandem_reports: applies `t` to every
// report of `ids` (distinct, validated) of round `round_id` in one
// statement, inside the caller's transaction; FAILED_PRECONDITION "<op>: a
// report of round N cannot be ..." unless every one of them allows it (the
// caller then returns before COMMIT, so nothing changes). With a non-empty
// `owner` (a replica id, ReplicatedWork) the reports must also be free or
// held by that replica, and become held by it.
absl::Status ApplyPostgresTransition(pg::Connection& conn, const std::string& task_id,
                                     ReportTransition t, int64_t round_id,
                                     absl::Span<const std::string> ids, absl::string_view op,
                                     absl::string_view owner = "");

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_POSTGRES_ROWS_H_
