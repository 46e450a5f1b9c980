// The leader's view of its helper (cf. the injected forwarding function of
// two-server PIR designs): the two calls of the verification exchange. The
// core never sees gRPC; aggregator/service/grpc_peer_channel.h implements
// this over the AggregatorPeer service and aggregator/testing/ wires two
// in-process aggregators directly.
#ifndef TANDEM_AGGREGATOR_CORE_PEER_CHANNEL_H_
#define TANDEM_AGGREGATOR_CORE_PEER_CHANNEL_H_

#include "absl/status/statusor.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {

// Implementations are thread-safe. Errors: UNAVAILABLE / DEADLINE_EXCEEDED
// (transient, the leader retries later), or the helper's own status.
class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  virtual absl::StatusOr<proto::VerifyResponse> Verify(const proto::VerifyRequest& request) = 0;
  virtual absl::StatusOr<proto::AcceptedSetAck> CommitAcceptedSet(
      const proto::AcceptedSet& request) = 0;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_PEER_CHANNEL_H_
