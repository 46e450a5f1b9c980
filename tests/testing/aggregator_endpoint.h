// Test-only gRPC stubs of one running tandem-aggregator (upload and collector
// services) with status-returning calls, for the daemon integration tests.
#ifndef TANDEM_TESTS_TESTING_AGGREGATOR_ENDPOINT_H_
#define TANDEM_TESTS_TESTING_AGGREGATOR_ENDPOINT_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::testing {

struct AggregatorEndpoint {
  // Channel to `address` with a 64 MiB receive limit (released shares).
  static AggregatorEndpoint Connect(const std::string& address,
                                    std::shared_ptr<grpc::ChannelCredentials> credentials);
  absl::Status Open(const proto::RoundParameters& parameters) const;
  absl::Status Upload(const proto::UploadRequest& request) const;
  absl::StatusOr<proto::FinalizeResponse> Finalize(const std::string& task_id,
                                                   uint64_t round_id) const;
  absl::StatusOr<proto::AggregatorStatusResponse> Status(const std::string& task_id) const;

  std::unique_ptr<proto::AggregatorUpload::Stub> upload;
  std::unique_ptr<proto::AggregatorCollector::Stub> collector;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TESTING_AGGREGATOR_ENDPOINT_H_
