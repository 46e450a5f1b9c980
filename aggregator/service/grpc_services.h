// gRPC adapters of an Aggregator: proto in, library call, status out.
// Not owning: the Aggregator must outlive the services. Thread-safe.
#ifndef TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_
#define TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_

#include "aggregator/core/aggregator.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::aggregator {

class UploadService final : public proto::AggregatorUpload::Service {
 public:
  explicit UploadService(Aggregator* aggregator) : aggregator_(aggregator) {}
  grpc::Status Upload(grpc::ServerContext* context, const proto::UploadRequest* request,
                      proto::UploadResponse* response) override;

 private:
  Aggregator* aggregator_;
};

class PeerService final : public proto::AggregatorPeer::Service {
 public:
  explicit PeerService(Aggregator* aggregator) : aggregator_(aggregator) {}
  grpc::Status Verify(grpc::ServerContext* context, const proto::VerifyRequest* request,
                      proto::VerifyResponse* response) override;
  grpc::Status CommitAcceptedSet(grpc::ServerContext* context, const proto::AcceptedSet* request,
                                 proto::AcceptedSetAck* response) override;

 private:
  Aggregator* aggregator_;
};

class CollectorService final : public proto::AggregatorCollector::Service {
 public:
  explicit CollectorService(Aggregator* aggregator) : aggregator_(aggregator) {}
  grpc::Status OpenRound(grpc::ServerContext* context, const proto::OpenRoundRequest* request,
                         proto::OpenRoundResponse* response) override;
  grpc::Status Finalize(grpc::ServerContext* context, const proto::FinalizeRequest* request,
                        proto::FinalizeResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::AggregatorStatusRequest* request,
                      proto::AggregatorStatusResponse* response) override;

 private:
  Aggregator* aggregator_;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_GRPC_SERVICES_H_
