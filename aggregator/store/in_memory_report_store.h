// In-memory ReportStore for tests of the code above the store (same
// contract as SqliteReportStore, nothing survives the process).
// Thread-safe: every method takes one mutex.
#ifndef TANDEM_AGGREGATOR_STORE_IN_MEMORY_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_IN_MEMORY_REPORT_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "aggregator/store/report_store.h"

namespace tandem::aggregator {

class InMemoryReportStore : public ReportStore {
 public:
  InMemoryReportStore() = default;

  absl::Status OpenRound(int64_t round_id, absl::string_view parameters) override;
  absl::Status CloseRound(int64_t round_id) override;
  absl::Status ReleaseRound(int64_t round_id, absl::string_view bytes) override;
  absl::StatusOr<RoundRecord> GetRound(int64_t round_id) override;
  absl::StatusOr<std::string> BindRoundSecret(int64_t round_id,
                                              absl::string_view secret) override;
  absl::StatusOr<std::vector<RoundRecord>> ListRounds() override;
  absl::Status PutPending(int64_t round_id, absl::string_view report_id,
                          absl::string_view share) override;
  absl::StatusOr<std::vector<absl::Status>> PutPendingBatch(
      int64_t round_id, absl::Span<const PendingReport> reports) override;
  absl::Status MarkAccepted(absl::string_view report_id) override;
  absl::Status MarkRejected(absl::string_view report_id) override;
  absl::StatusOr<ReportRecord> GetReport(absl::string_view report_id) override;
  absl::StatusOr<ReportCounts> CountReports(int64_t round_id) override;
  absl::StatusOr<std::vector<ReportRecord>> ListReports(int64_t round_id,
                                                        ReportFilter filter) override;
  absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> GetReportStates(
      absl::Span<const std::string> report_ids) override;
  absl::StatusOr<std::vector<ReportRecord>> ListReportStates(int64_t round_id,
                                                             ReportFilter filter) override;
  absl::Status SaveAccumulator(int64_t round_id, absl::string_view bytes,
                               absl::Span<const std::string> newly_counted) override;
  absl::Status CommitBatch(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> accept_and_count,
                           absl::Span<const std::string> reject) override;
  absl::Status CommitDecisions(int64_t round_id, absl::Span<const std::string> accept,
                               absl::Span<const std::string> reject) override;
  absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t round_id) override;

 private:
  absl::StatusOr<RoundRecord*> OpenRoundLocked(int64_t round_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Transition(absl::string_view report_id, ReportState to);
  // `digest`: ShareDigest(share).
  absl::Status PutPendingLocked(int64_t round_id, absl::string_view report_id,
                                absl::string_view share, absl::string_view digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<int64_t, RoundRecord> rounds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ReportRecord, std::less<>> reports_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, AccumulatorSnapshot> accumulators_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> secrets_ ABSL_GUARDED_BY(mu_);
};

// True when `r` matches `filter` (shared with the other implementations).
bool MatchesFilter(const ReportRecord& r, ReportFilter filter);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_IN_MEMORY_REPORT_STORE_H_
