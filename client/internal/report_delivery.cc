#include "client/internal/report_delivery.h"

#include <cstring>

#include "base/status_macros.h"

namespace tandem::client {

std::string EncodePendingReport(uint64_t round_id, const proto::UploadRequest& to_leader,
                                const proto::UploadRequest& to_helper) {
  const std::string a = to_leader.SerializeAsString();
  const std::string b = to_helper.SerializeAsString();
  std::string out(24, '\0');
  const uint64_t header[3] = {round_id, a.size(), b.size()};
  std::memcpy(out.data(), header, sizeof(header));
  out.reserve(24 + a.size() + b.size());
  return out.append(a).append(b);
}

std::optional<PendingReport> DecodePendingReport(const std::string& blob) {
  if (blob.size() < 24) return std::nullopt;
  uint64_t h[3];
  std::memcpy(h, blob.data(), sizeof(h));
  if (h[1] > blob.size() - 24 || h[2] != blob.size() - 24 - h[1]) return std::nullopt;
  PendingReport out;
  out.round_id = h[0];
  if (!out.to_leader.ParseFromArray(blob.data() + 24, static_cast<int>(h[1])) ||
      !out.to_helper.ParseFromArray(blob.data() + 24 + h[1], static_cast<int>(h[2]))) {
    return std::nullopt;
  }
  return out;
}

absl::Status DeliverReport(RoundTransport& transport, StateStore* store,
                           const std::string& client_id, const proto::CheckInResponse& task,
                           const UploadEndpoints& endpoints, const PendingReport& report,
                           uint64_t num_examples, uint64_t* bytes_up) {
  *bytes_up = report.to_leader.ByteSizeLong() + report.to_helper.ByteSizeLong();
  TANDEM_RETURN_IF_ERROR(
      transport.Upload(endpoints.leader, endpoints.helper, report.to_leader, report.to_helper));
  proto::UploadDoneRequest done;
  done.set_client_id(client_id);
  done.set_task_id(task.task_id());
  done.set_round_id(task.round_id());
  done.set_report_id(report.to_leader.report_id());
  done.set_num_examples(num_examples);
  done.set_bytes_uploaded(*bytes_up);
  // The ticket the report went out with (a resent report's own, stored).
  if (report.to_leader.has_ticket()) *done.mutable_ticket() = report.to_leader.ticket();
  TANDEM_RETURN_IF_ERROR(transport.UploadDone(done));
  if (store != nullptr) TANDEM_RETURN_IF_ERROR(store->Delete(kPendingReportKey));
  return absl::OkStatus();
}

}  // namespace tandem::client
