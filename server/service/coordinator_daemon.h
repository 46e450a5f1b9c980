// tandem-coordinator as a library: the Coordinator core with its SQLite
// store, gRPC clients of both aggregators, the Coordinator gRPC service, the
// round driver thread and the /metrics endpoint. The main is a thin flag
// parser over Start().
// Thread safety: Start/Shutdown from one thread; the rest is internal.
#ifndef TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_
#define TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "base/grpc_credentials.h"
#include "server/core/coordinator.h"
#include "server/service/coordinator_service.h"
#include "server/service/metrics_http.h"
#include "server/transport/grpc_aggregator_client.h"

namespace tandem::server {

struct CoordinatorDaemonOptions {
  CoordinatorOptions coordinator;   // leader/helper endpoints are announced to clients
  std::string listen_address = "127.0.0.1:0";
  std::string leader_address;       // how the coordinator reaches the aggregators
  std::string helper_address;
  TlsFiles tls;                     // server side and the aggregator channels
  std::string state_dir;            // holds coordinator.db
  int metrics_port = -1;            // -1 = no /metrics endpoint, 0 = any port
  absl::Duration tick = absl::Milliseconds(50);
  size_t chunk_bytes = size_t{1} << 20;
};

class CoordinatorDaemon {
 public:
  // INVALID_ARGUMENT for missing addresses/state_dir or bad options;
  // UNAVAILABLE when the port cannot be bound; store errors as they come.
  static absl::StatusOr<std::unique_ptr<CoordinatorDaemon>> Start(
      CoordinatorDaemonOptions options, ml::Dataset eval_data, const Clock* clock,
      SecureRandom* random);
  ~CoordinatorDaemon();  // Shutdown()

  int port() const { return port_; }
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  Coordinator& coordinator() { return *coordinator_; }
  // Stops the driver and the servers (idempotent).
  void Shutdown();

 private:
  CoordinatorDaemon() = default;
  void Drive(absl::Duration tick);

  std::unique_ptr<GrpcAggregatorClient> leader_;
  std::unique_ptr<GrpcAggregatorClient> helper_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  std::atomic<bool> stop_{false};
  std::thread driver_;
  int port_ = 0;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_
