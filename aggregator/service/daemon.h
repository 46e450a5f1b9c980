// tandem-aggregator as a library: the Aggregator, its SQLite stores (one file
// per task under state_path), the gRPC server with the upload, peer and
// collector services, the TLS credentials and, for the leader, the
// background loop that verifies pending reports with the helper.
#ifndef TANDEM_AGGREGATOR_SERVICE_DAEMON_H_
#define TANDEM_AGGREGATOR_SERVICE_DAEMON_H_

#include <memory>
#include <thread>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/service/grpc_services.h"
#include "base/clock.h"
#include "base/random.h"
#include "proto/config.pb.h"

namespace tandem::aggregator {

// Checks a config before anything starts: role, listen address, state path,
// the leader's peer, and TLS (plaintext only by explicit opt-in; otherwise
// certificate, key and -- for mutual TLS or a leader -- root paths).
// INVALID_ARGUMENT naming the field.
absl::Status ValidateConfig(const proto::AggregatorConfig& config);

class AggregatorDaemon {
 public:
  // Validates `config` (INVALID_ARGUMENT), opens the state directory and
  // starts serving. `clock` and `noise_random` are not owned and must
  // outlive the daemon. UNAVAILABLE when the listen address cannot be bound.
  static absl::StatusOr<std::unique_ptr<AggregatorDaemon>> Start(
      const proto::AggregatorConfig& config, Clock* clock, SecureRandom* noise_random,
      absl::Duration process_interval = absl::Milliseconds(100));
  ~AggregatorDaemon();  // Shuts down.

  // The bound port (useful with listen port 0).
  int port() const { return port_; }
  Aggregator& aggregator() { return *aggregator_; }
  // Stops accepting calls, finishes in-flight ones, stops the loop. Idempotent.
  void Shutdown();

 private:
  AggregatorDaemon() = default;
  void ProcessLoop(absl::Duration interval);

  std::unique_ptr<PeerChannel> peer_;
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<UploadService> upload_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<CollectorService> collector_;
  std::unique_ptr<grpc::Server> server_;
  std::thread loop_;
  absl::Notification stop_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_DAEMON_H_
