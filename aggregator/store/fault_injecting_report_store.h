// Test wrapper (after leveldb's ErrorEnv): forwards every call to another
// ReportStore and makes chosen writes fail, to test the callers' error
// handling and recovery.
//
//   FaultInjectingReportStore store(&real);
//   store.FailNthWrite(3, FaultMode::kBeforeWrite);  // 3rd write from now fails
//
// Writes are OpenRound, CloseRound, PutPending, MarkAccepted, MarkRejected
// and SaveAccumulator; reads always pass through. kBeforeWrite fails without
// touching the inner store (a lost request); kAfterWrite performs the write
// and then reports failure (a lost acknowledgement). Thread-safe; the inner
// store is not owned and must outlive the wrapper.
#ifndef TANDEM_AGGREGATOR_STORE_FAULT_INJECTING_REPORT_STORE_H_
#define TANDEM_AGGREGATOR_STORE_FAULT_INJECTING_REPORT_STORE_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "aggregator/store/report_store.h"

namespace tandem::aggregator {

enum class FaultMode { kBeforeWrite, kAfterWrite };

class FaultInjectingReportStore : public ReportStore {
 public:
  explicit FaultInjectingReportStore(ReportStore* inner) : inner_(inner) {}

  // Fails the n-th write from now (n >= 1) with `error` (UNAVAILABLE
  // "injected fault" by default); n = 0 disarms. One-shot.
  void FailNthWrite(int64_t n, FaultMode mode = FaultMode::kBeforeWrite,
                    absl::Status error = absl::UnavailableError("injected fault"));
  // Writes attempted through this wrapper so far (failed ones included).
  int64_t writes() const;

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
  absl::Status SaveAccumulator(int64_t round_id, absl::string_view bytes,
                               absl::Span<const std::string> newly_counted) override;
  absl::Status CommitBatch(int64_t round_id, absl::string_view bytes,
                           absl::Span<const std::string> accept_and_count,
                           absl::Span<const std::string> reject) override;
  absl::Status CommitDecisions(int64_t round_id, absl::Span<const std::string> accept,
                               absl::Span<const std::string> reject) override;
  absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t round_id) override;

 private:
  template <typename Fn>
  absl::Status Write(Fn&& fn);

  ReportStore* inner_;  // Not owned.
  mutable absl::Mutex mu_;
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fail_at_ ABSL_GUARDED_BY(mu_) = 0;  // Absolute write number, 0 = off.
  FaultMode mode_ ABSL_GUARDED_BY(mu_) = FaultMode::kBeforeWrite;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_FAULT_INJECTING_REPORT_STORE_H_
