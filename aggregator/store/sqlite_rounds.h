// The tables shared by the SQLite-backed report stores (SqliteReportStore
// and SegmentReportStore's index): rounds, round secrets and report counts,
// with the semantics of report_store.h. Free functions over a caller-owned
// database; the caller holds its own lock and validates its arguments. The
// *Row writers run their own transaction. DATA_LOSS for rows that fail
// validation, NOT_FOUND for an unknown round.
#ifndef TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_
#define TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "aggregator/store/report_store.h"
#include "aggregator/store/report_transition.h"
#include "base/sqlite/database.h"

namespace tandem::aggregator {

// The row of `round_id` in `rounds(round_id, parameters, state)`.
absl::StatusOr<RoundRecord> ReadRoundRow(sqlite::Database& db, int64_t round_id);
// Every round, ordered by id.
absl::StatusOr<std::vector<RoundRecord>> ReadAllRounds(sqlite::Database& db);
// OK for an open round, FAILED_PRECONDITION for a closed or released one.
absl::Status RequireOpenRound(sqlite::Database& db, int64_t round_id);

// ReportStore::OpenRound, CloseRound, BindRoundSecret and CountReports on
// the shared tables.
absl::Status OpenRoundRow(sqlite::Database& db, int64_t round_id, absl::string_view parameters);
absl::Status CloseRoundRow(sqlite::Database& db, int64_t round_id);
absl::StatusOr<std::string> BindRoundSecretRow(sqlite::Database& db, int64_t round_id,
                                               absl::string_view secret);
absl::StatusOr<ReportCounts> CountReportRows(sqlite::Database& db, int64_t round_id);
// Marks the round released, inside the caller's open transaction (the
// caller checked that it is open: RequireOpenRound).
absl::Status MarkRoundReleasedRow(sqlite::Database& db, int64_t round_id);

// Applies `t` (report_transition.h) on the shared reports(report_id,
// round_id, state, counted, ...) table to every report of `ids` in round `round_id`, inside the
// caller's open transaction. `drop_share` is the store's SET clause that
// forgets a share ("share = NULL" for blobs in the row, the segment
// locator's columns for segment files). FAILED_PRECONDITION "<op>: ..." at
// the first report in a state `t` does not allow or of another round; the
// caller then returns before committing, so its transaction rolls back whole.
absl::Status ApplyTransition(sqlite::Database& db, ReportTransition t, absl::string_view drop_share,
                             int64_t round_id, absl::Span<const std::string> ids,
                             absl::string_view op);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_SQLITE_ROUNDS_H_
