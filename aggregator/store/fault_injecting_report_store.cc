#include "aggregator/store/fault_injecting_report_store.h"

#include <utility>

namespace tandem::aggregator {

void FaultInjectingReportStore::FailNthWrite(int64_t n, FaultMode mode, absl::Status error) {
  absl::MutexLock lock(&mu_);
  fail_at_ = n <= 0 ? 0 : writes_ + n;
  mode_ = mode;
  error_ = error.ok() ? absl::UnavailableError("injected fault") : std::move(error);
}

int64_t FaultInjectingReportStore::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

template <typename Fn>
absl::Status FaultInjectingReportStore::Write(Fn&& fn) {
  bool fail = false;
  FaultMode mode;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    ++writes_;
    if (fail_at_ != 0 && writes_ == fail_at_) {
      fail = true;
      fail_at_ = 0;
    }
    mode = mode_;
    error = error_;
  }
  if (!fail) return fn();
  if (mode == FaultMode::kAfterWrite) fn().IgnoreError();
  return error;
}

absl::Status FaultInjectingReportStore::OpenRound(int64_t round_id, absl::string_view parameters) {
  return Write([&] { return inner_->OpenRound(round_id, parameters); });
}
absl::Status FaultInjectingReportStore::CloseRound(int64_t round_id) {
  return Write([&] { return inner_->CloseRound(round_id); });
}
absl::Status FaultInjectingReportStore::ReleaseRound(int64_t round_id, absl::string_view bytes) {
  return Write([&] { return inner_->ReleaseRound(round_id, bytes); });
}
absl::StatusOr<ReportCounts> FaultInjectingReportStore::CountReports(int64_t round_id) {
  return inner_->CountReports(round_id);
}
absl::StatusOr<std::string> FaultInjectingReportStore::BindRoundSecret(int64_t round_id,
                                                                       absl::string_view secret) {
  absl::StatusOr<std::string> out;
  absl::Status s = Write([&] {
    out = inner_->BindRoundSecret(round_id, secret);
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}
absl::StatusOr<RoundRecord> FaultInjectingReportStore::GetRound(int64_t round_id) {
  return inner_->GetRound(round_id);
}
absl::StatusOr<std::vector<absl::Status>> FaultInjectingReportStore::PutPendingBatch(
    int64_t round_id, absl::Span<const PendingReport> reports) {
  absl::StatusOr<std::vector<absl::Status>> out;
  absl::Status s = Write([&] {
    out = inner_->PutPendingBatch(round_id, reports);
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}
absl::Status FaultInjectingReportStore::CommitBatch(int64_t round_id, absl::string_view bytes,
                                                    absl::Span<const std::string> accept_and_count,
                                                    absl::Span<const std::string> reject) {
  return Write([&] { return inner_->CommitBatch(round_id, bytes, accept_and_count, reject); });
}
absl::Status FaultInjectingReportStore::CommitDecisions(int64_t round_id,
                                                        absl::Span<const std::string> accept,
                                                        absl::Span<const std::string> reject) {
  return Write([&] { return inner_->CommitDecisions(round_id, accept, reject); });
}
absl::StatusOr<std::vector<RoundRecord>> FaultInjectingReportStore::ListRounds() {
  return inner_->ListRounds();
}
absl::Status FaultInjectingReportStore::PutPending(int64_t round_id, absl::string_view report_id,
                                                   absl::string_view share) {
  return Write([&] { return inner_->PutPending(round_id, report_id, share); });
}
absl::Status FaultInjectingReportStore::MarkAccepted(absl::string_view report_id) {
  return Write([&] { return inner_->MarkAccepted(report_id); });
}
absl::Status FaultInjectingReportStore::MarkRejected(absl::string_view report_id) {
  return Write([&] { return inner_->MarkRejected(report_id); });
}
absl::StatusOr<ReportRecord> FaultInjectingReportStore::GetReport(absl::string_view report_id) {
  return inner_->GetReport(report_id);
}
absl::StatusOr<std::vector<ReportRecord>> FaultInjectingReportStore::ListReports(
    int64_t round_id, ReportFilter filter) {
  return inner_->ListReports(round_id, filter);
}
absl::Status FaultInjectingReportStore::SaveAccumulator(
    int64_t round_id, absl::string_view bytes, absl::Span<const std::string> newly_counted) {
  return Write([&] { return inner_->SaveAccumulator(round_id, bytes, newly_counted); });
}
absl::StatusOr<AccumulatorSnapshot> FaultInjectingReportStore::LoadAccumulator(int64_t round_id) {
  return inner_->LoadAccumulator(round_id);
}

}  // namespace tandem::aggregator
