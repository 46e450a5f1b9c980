// The rounds table shared by the SQLite-backed report stores
// (SqliteReportStore and SegmentReportStore's index): reading, listing and
// checking rounds. Free functions over a caller-owned database; the caller
// holds its own lock and transaction. DATA_LOSS for rows that fail
// validation, NOT_FOUND for an unknown round.
#ifndef TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_
#define TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "aggregator/store/report_store.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

// DATA_LOSS "report store: corrupt <what>".
absl::Status CorruptStore(absl::string_view what);

// The row of `round_id` in `rounds(round_id, parameters, state)`.
absl::StatusOr<RoundRecord> ReadRoundRow(sqlite::Database& db, int64_t round_id);
// Every round, ordered by id.
absl::StatusOr<std::vector<RoundRecord>> ReadAllRounds(sqlite::Database& db);
// OK for an open round, FAILED_PRECONDITION for a closed or released one.
absl::Status RequireOpenRound(sqlite::Database& db, int64_t round_id);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_
