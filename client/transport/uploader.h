// Upload of one report's two shares to the two aggregators. The report id is
// the idempotency key, so a retried upload never counts twice (the
// aggregators accept an identical retry and refuse a changed one).
#ifndef TANDEM_CLIENT_TRANSPORT_UPLOADER_H_
#define TANDEM_CLIENT_TRANSPORT_UPLOADER_H_

#include "absl/status/status.h"
#include "proto/aggregator.pb.h"

namespace tandem::client {

// Thread-safe in all implementations.
class Uploader {
 public:
  virtual ~Uploader() = default;
  // Sends `to_leader` to the leader and `to_helper` to the helper. Both must
  // succeed for the report to count; errors name the failing server.
  virtual absl::Status Upload(const proto::UploadRequest& to_leader,
                              const proto::UploadRequest& to_helper) = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_TRANSPORT_UPLOADER_H_
