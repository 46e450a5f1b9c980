#include "aggregator/store/report_transition.h"

#include "absl/strings/str_cat.h"

namespace tandem::aggregator {

TransitionSql TransitionClauses(ReportTransition t, const TransitionDialect& d) {
  switch (t) {
    case ReportTransition::kCount:
      return {absl::StrCat("counted = ", d.counted, ", ", d.drop_share),
              absl::StrCat("state = 1 AND ", d.uncounted),
              "counted (it is not accepted and uncounted)"};
    case ReportTransition::kAcceptAndCount:
      return {absl::StrCat("state = 1, counted = ", d.counted, ", ", d.drop_share),
              absl::StrCat("(state = 0 OR (state = 1 AND ", d.uncounted, "))"), "counted"};
    case ReportTransition::kAccept:
      return {"state = 1", "state IN (0, 1)", "accepted"};
    case ReportTransition::kReject:
      return {absl::StrCat("state = 2, ", d.drop_share), "state IN (0, 2)", "rejected"};
  }
  return {};
}

absl::Status TransitionRefused(absl::string_view op, int64_t round_id, const TransitionSql& sql) {
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": a report of round ", round_id, " cannot be ", sql.verb));
}

}  // namespace tandem::aggregator
