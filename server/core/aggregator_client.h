// The coordinator's view of one aggregation server (collector API). The core
// never sees gRPC: server/transport/grpc_aggregator_client.h implements it.
#ifndef TANDEM_SERVER_CORE_AGGREGATOR_CLIENT_H_
#define TANDEM_SERVER_CORE_AGGREGATOR_CLIENT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/aggregator.pb.h"

namespace tandem::server {

// Thread-safe in all implementations; errors are the aggregator's status or
// UNAVAILABLE / DEADLINE_EXCEEDED from the transport.
class AggregatorClient {
 public:
  virtual ~AggregatorClient() = default;
  // The aggregator's answer says its clock (clock_skew.h).
  virtual absl::StatusOr<proto::OpenRoundResponse> OpenRound(
      const proto::RoundParameters& parameters) = 0;
  virtual absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest& request) = 0;
  // Ends the open round without a release (its task was deleted), dropping
  // its advance charge on the aggregator's population ledger. Test doubles
  // that never see a deletion keep this default.
  virtual absl::Status AbandonRound(const std::string& task_id, uint64_t round_id) {
    return absl::UnimplementedError("AbandonRound");
  }
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_AGGREGATOR_CLIENT_H_
