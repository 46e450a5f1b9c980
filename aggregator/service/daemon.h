// tandem-aggregator as a library: the Aggregator, its SQLite stores (one file
// per task under state_path), three gRPC listeners with their own
// credentials, receive limits and callers, and, for the leader, the
// background loop that verifies pending reports with the helper.
//
// Listeners (ARCHITECTURE.md, trust model):
//   upload     listen_address: public, server TLS (clients are anonymous);
//              the upload ticket decides. Receive limit from the policy's
//              max_sent_values (UploadLimitBytes), not a blanket 256 MiB.
//   collector  collector_listen_address: mutual TLS, coordinator_identities
//              only (PERMISSION_DENIED otherwise, counted).
//   peer       peer_listen_address, helper only: mutual TLS,
//              leader_identities only.
//   metrics    metrics_listen_address (optional): Prometheus /metrics, plain
//              HTTP (aggregator_metrics.h lists the series).
// With tls.insecure_plaintext (loopback addresses only) an internal
// listener whose address is empty shares the upload port, and no identity
// is checked: local development only.
#ifndef TANDEM_AGGREGATOR_SERVICE_DAEMON_H_
#define TANDEM_AGGREGATOR_SERVICE_DAEMON_H_

#include <grpcpp/server.h>

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/service/admin_service.h"
#include "aggregator/service/aggregator_metrics.h"
#include "aggregator/service/grpc_services.h"
#include "base/clock.h"
#include "base/grpc_caller_gate.h"
#include "base/grpc_credentials.h"
#include "base/metrics_server.h"
#include "base/random.h"
#include "base/stall_reporter.h"
#include "proto/aggregator_admin.pb.h"
#include "proto/config.pb.h"

namespace tandem::aggregator {

// Checks a config before anything starts: role, listen addresses, state
// path, the leader's peer, TLS (plaintext only by explicit opt-in and only
// on loopback; otherwise certificate, key, roots, the internal listeners and
// their identities), the ticket key (or the explicit opt-out) and the
// policies. INVALID_ARGUMENT naming the field.
absl::Status ValidateConfig(const proto::AggregatorConfig& config);

// One --task flag value, "ID" or "ID@POPULATION", as a TaskPolicy (checked
// with the rest by ValidateConfig / PolicySet::FromConfig).
proto::TaskPolicy TaskPolicyFromFlag(absl::string_view task);

// Receive limit of the upload listener for reports of up to
// `max_sent_values` values: 8 bytes per value in the key shares, about 8.5
// per value for the leader's norm-proof witness and proof share, plus key
// overhead (crypto/dpf/key_validator.h MaxSerializedKeySetSize is below
// this for every shape with k * B <= max_sent_values).
int64_t UploadLimitBytes(uint64_t max_sent_values);

class AggregatorDaemon {
 public:
  // Validates `config` (INVALID_ARGUMENT), reads the ticket key, opens the
  // state directory and starts serving. `clock` and `noise_random` are not
  // owned and must outlive the daemon. UNAVAILABLE when a listen address
  // cannot be bound.
  // `admin`: the operator API's listener (none when its address is empty);
  // its provisioned tasks (state_path/provisioned.textproto) join the
  // config's at start either way.
  static absl::StatusOr<std::unique_ptr<AggregatorDaemon>> Start(
      const proto::AggregatorConfig& config, Clock* clock, SecureRandom* noise_random,
      absl::Duration process_interval = absl::Milliseconds(100),
      const proto::AggregatorAdminConfig& admin = proto::AggregatorAdminConfig());
  ~AggregatorDaemon();  // Shuts down.

  // The bound ports (useful with port 0); an internal port equals port()
  // when that API shares the upload listener; peer_port() is 0 on a leader.
  int port() const { return port_; }
  int collector_port() const { return collector_port_; }
  int peer_port() const { return peer_port_; }
  int admin_port() const { return admin_port_; }  // 0 without an operator API
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  Aggregator& aggregator() { return *aggregator_; }
  const RefusalCounters& refusals() const { return refusals_; }
  // SIGHUP: re-reads the certificate, key and roots of every listener and
  // of the peer channel (TlsReloader::Reload; a set that fails validation
  // keeps serving its previous material). OK under plaintext.
  absl::Status ReloadTls() { return tls_.Reload(); }
  // Stops accepting calls, finishes in-flight ones, stops the loop. Idempotent.
  void Shutdown();

 private:
  AggregatorDaemon() = default;
  void ProcessLoop(absl::Duration interval);

  // First member: destroyed last, after every server and channel reading it.
  TlsReloader tls_;
  RefusalCounters refusals_;
  std::unique_ptr<AggregatorMetrics> metrics_;
  // The verification loop's (leader); read by metrics.
  StallReporter stall_{"verification", "passes", "pending reports wait and the pass is retried"};
  std::unique_ptr<CallerGate> collector_gate_;
  std::unique_ptr<CallerGate> peer_gate_;
  std::unique_ptr<PeerChannel> peer_;
  std::unique_ptr<MeteredPeerChannel> metered_peer_;  // over peer_, what the core calls
  std::unique_ptr<Aggregator> aggregator_;
  std::unique_ptr<UploadService> upload_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<CollectorService> collector_;
  std::unique_ptr<CallerGate> admin_gate_;
  std::unique_ptr<AggregatorAdminService> admin_service_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  // Declared after the aggregator: destroyed (and its threads joined)
  // before anything a scrape reads.
  std::unique_ptr<MetricsServer> metrics_server_;
  std::thread loop_;
  absl::Notification stop_;
  int port_ = 0;
  int collector_port_ = 0;
  int peer_port_ = 0;
  int admin_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_DAEMON_H_
