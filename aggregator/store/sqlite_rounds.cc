#include "aggregator/store/sqlite_rounds.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

absl::Status CorruptStore(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("report store: corrupt ", what));
}

absl::StatusOr<RoundRecord> ReadRoundRow(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db.Prepare("SELECT parameters, state FROM rounds WHERE round_id = ?1"));
  TANDEM_RETURN_IF_ERROR(st.BindInt64(1, round_id));
  TANDEM_ASSIGN_OR_RETURN(const bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("round ", round_id, " not found"));
  RoundRecord r;
  r.round_id = round_id;
  r.parameters = st.ColumnBlob(0);
  const int64_t state = st.ColumnInt64(1);
  if (state < 0 || state > 2) return CorruptStore("round state");
  if (r.parameters.size() > kMaxParametersBytes) return CorruptStore("round parameters");
  r.state = static_cast<RoundState>(state);
  return r;
}

absl::StatusOr<std::vector<RoundRecord>> ReadAllRounds(sqlite::Database& db) {
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db.Prepare("SELECT round_id FROM rounds ORDER BY round_id"));
  std::vector<int64_t> ids;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    ids.push_back(st.ColumnInt64(0));
  }
  std::vector<RoundRecord> out;
  for (int64_t id : ids) {
    if (!ValidateRoundId(id).ok()) return CorruptStore("round id");
    TANDEM_ASSIGN_OR_RETURN(RoundRecord r, ReadRoundRow(db, id));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status RequireOpenRound(sqlite::Database& db, int64_t round_id) {
  TANDEM_ASSIGN_OR_RETURN(const RoundRecord r, ReadRoundRow(db, round_id));
  if (r.state != RoundState::kOpen) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
