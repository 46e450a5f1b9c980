// Internal: the part of a round both participants share (RoundRunner, which
// trains the ml/ models itself, and StepwiseRunner, whose app trains): the
// pending report kept in the StateStore until the coordinator has it, and
// its delivery (both uploads, then UploadDone, then the pending report is
// dropped).
//
// The pending report is the pair of serialized UploadRequests under the
// report's id (the upload ticket's id): resending it is idempotent on the
// aggregators, a second report under the same ticket is not, so whoever
// finds one for the round it is assigned resends it instead of encoding a
// new one.
// Thread safety: pure functions, except DeliverReport, which is as
// thread-safe as the transport and store it is given.
#ifndef TANDEM_CLIENT_INTERNAL_REPORT_DELIVERY_H_
#define TANDEM_CLIENT_INTERNAL_REPORT_DELIVERY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/internal/assignment_checks.h"
#include "client/internal/round_transport.h"
#include "proto/aggregator.pb.h"
#include "proto/coordinator.pb.h"
#include "tandem/client/participant.h"

namespace tandem::client {

// StateStore key of the report not yet known to be delivered.
inline constexpr char kPendingReportKey[] = "pending-report";

struct PendingReport {
  uint64_t round_id = 0;
  proto::UploadRequest to_leader;
  proto::UploadRequest to_helper;
};

// Round id, then both serialized requests, length-prefixed.
std::string EncodePendingReport(uint64_t round_id, const proto::UploadRequest& to_leader,
                                const proto::UploadRequest& to_helper);
// nullopt for a blob that is not one (a corrupt or foreign value).
std::optional<PendingReport> DecodePendingReport(const std::string& blob);

// Uploads `report` to both endpoints, reports it to the coordinator
// (UploadDone with the report's own ticket) and then deletes the stored
// pending report when `store` is non-null. `*bytes_up` = both requests'
// serialized size (set before the upload). Errors of either step propagate;
// the pending report is kept on any error.
absl::Status DeliverReport(RoundTransport& transport, StateStore* store,
                           const std::string& client_id, const proto::CheckInResponse& task,
                           const UploadEndpoints& endpoints, const PendingReport& report,
                           uint64_t num_examples, uint64_t* bytes_up);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_REPORT_DELIVERY_H_
