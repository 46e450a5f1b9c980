// The per-report state changes of SaveAccumulator, CommitBatch and
// CommitDecisions, as SQL over a reports table with the columns state
// (0 pending, 1 accepted, 2 rejected) and counted, shared by the SQLite
// stores (sqlite_rounds.h ApplyTransition) and the PostgreSQL store
// (postgres_rows.h ApplyPostgresTransition), which differ only in how a
// boolean is written and how a share is forgotten. Pure functions;
// thread-safe.
#ifndef TANDEM_AGGREGATOR_STORE_REPORT_TRANSITION_H_
#define TANDEM_AGGREGATOR_STORE_REPORT_TRANSITION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::aggregator {

enum class ReportTransition {
  kCount,           // accepted and uncounted -> counted; the share is dropped
  kAcceptAndCount,  // pending or accepted-uncounted -> accepted and counted; dropped
  kAccept,          // pending or accepted -> accepted; the share is KEPT
  kReject,          // pending or rejected -> rejected; dropped
};

// How a store's SQL dialect writes the parts a transition needs.
struct TransitionDialect {
  absl::string_view counted;     // the value of a counted report: "1" / "TRUE"
  absl::string_view uncounted;   // predicate of an uncounted one: "counted = 0" / "NOT counted"
  absl::string_view drop_share;  // SET clause that forgets the share
};

// The SET clause, the WHERE predicate of the states `t` may start from, and
// the verb of its refusal.
struct TransitionSql {
  std::string set;
  std::string allowed;
  absl::string_view verb;
};
TransitionSql TransitionClauses(ReportTransition t, const TransitionDialect& dialect);

// FAILED_PRECONDITION "<op>: a report of round <round_id> cannot be <verb>".
absl::Status TransitionRefused(absl::string_view op, int64_t round_id, const TransitionSql& sql);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_REPORT_TRANSITION_H_
