// gRPC adapters of an Aggregator: caller check, proto in, library call,
// status out, counted in AggregatorMetrics. Not owning: the Aggregator,
// gates, counters and metrics must outlive the services. Thread-safe.
#ifndef TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_
#define TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_

#include "aggregator/core/aggregator.h"
#include "aggregator/service/aggregator_metrics.h"
#include "base/grpc_caller_gate.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::aggregator {

// The public upload API: anyone may call; the ticket decides (refusals
// with UNAUTHENTICATED are counted as "upload/ticket"). A unary method
// served through gRPC's streamed-unary handler, so that each request is
// parsed onto a protobuf arena of its own, which the aggregator's
// pending-share cache then keeps (Aggregator::Upload(request, arena)); the
// wire protocol is the plain unary call.
class UploadService final : public proto::AggregatorUpload::WithStreamedUnaryMethod_Upload<
                                proto::AggregatorUpload::Service> {
 public:
  UploadService(Aggregator* aggregator, RefusalCounters* counters, AggregatorMetrics* metrics)
      : aggregator_(aggregator), counters_(counters), metrics_(metrics) {}
  grpc::Status StreamedUpload(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<proto::UploadRequest, proto::UploadResponse>* stream) override;

 private:
  Aggregator* aggregator_;
  RefusalCounters* counters_;
  AggregatorMetrics* metrics_;
};

// The helper's peer API: the leader's identity only (`gate`).
class PeerService final : public proto::AggregatorPeer::Service {
 public:
  PeerService(Aggregator* aggregator, const CallerGate* gate, AggregatorMetrics* metrics)
      : aggregator_(aggregator), gate_(gate), metrics_(metrics) {}
  grpc::Status Verify(grpc::ServerContext* context, const proto::VerifyRequest* request,
                      proto::VerifyResponse* response) override;
  grpc::Status CommitAcceptedSet(grpc::ServerContext* context, const proto::AcceptedSet* request,
                                 proto::AcceptedSetAck* response) override;

 private:
  Aggregator* aggregator_;
  const CallerGate* gate_;
  AggregatorMetrics* metrics_;
};

// The collector API: the coordinator's identity only (`gate`). Status also
// reports the daemon's refusal counters; OpenRound for a task this server's
// operator did not provision counts "collector/unprovisioned".
class CollectorService final : public proto::AggregatorCollector::Service {
 public:
  CollectorService(Aggregator* aggregator, const CallerGate* gate, RefusalCounters* counters,
                   AggregatorMetrics* metrics)
      : aggregator_(aggregator), gate_(gate), counters_(counters), metrics_(metrics) {}
  grpc::Status OpenRound(grpc::ServerContext* context, const proto::OpenRoundRequest* request,
                         proto::OpenRoundResponse* response) override;
  grpc::Status Finalize(grpc::ServerContext* context, const proto::FinalizeRequest* request,
                        proto::FinalizeResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::AggregatorStatusRequest* request,
                      proto::AggregatorStatusResponse* response) override;
  grpc::Status AbandonRound(grpc::ServerContext* context, const proto::AbandonRoundRequest* request,
                            proto::AbandonRoundResponse* response) override;

 private:
  Aggregator* aggregator_;
  const CallerGate* gate_;
  RefusalCounters* counters_;
  AggregatorMetrics* metrics_;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_
