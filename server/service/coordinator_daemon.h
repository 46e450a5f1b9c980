// tandem-coordinator as a library: the Coordinator core with its SQLite
// store, gRPC clients of both aggregators, the Coordinator gRPC service, the
// round driver thread and the /metrics endpoint. The main is a thin flag
// parser over Start().
//
// Trust boundaries: the coordinator calls the aggregators' collector
// listeners over mutual TLS with its own certificate and pins each
// aggregator's TLS identity (leader_name / helper_name); clients are told the
// aggregators' upload endpoints (coordinator.leader / .helper, with the same
// names as Endpoint.server_name). Upload tickets are signed with the key at
// ticket_key_path, which Start reads and hands to the core.
// Thread safety: Start/Shutdown from one thread; the rest is internal.
#ifndef TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_
#define TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_

#include <grpcpp/server.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/grpc_caller_gate.h"
#include "base/grpc_credentials.h"
#include "base/metrics_server.h"
#include "server/core/coordinator.h"
#include "server/core/task_host.h"
#include "server/service/admin_service.h"
#include "server/service/coordinator_service.h"
#include "server/service/task_admin_service.h"
#include "server/store/device_store.h"
#include "server/transport/grpc_aggregator_client.h"
#include "server/transport/worker_evaluator.h"

namespace tandem::server {

struct CoordinatorDaemonOptions {
  // The command line's task (unless !boot_task), and for every task the
  // defaults the API's documents do not set: endpoints, devices, evaluator.
  // coordinator.leader / .helper: the upload endpoints announced to clients.
  // Their addresses are required with TLS (the upload listener is not the
  // collector listener); in plaintext they default to leader/helper_address.
  // tls and server_name are filled in by Start.
  CoordinatorOptions coordinator;
  std::string listen_address = "127.0.0.1:0";
  // The aggregators' collector listeners (mutual TLS): how the coordinator
  // reaches them. Two different addresses.
  std::string leader_address;
  std::string helper_address;
  // The aggregators' TLS identities (DNS SANs of their certificates), pinned
  // on the collector channels and announced to clients. Two different names;
  // unused in plaintext.
  std::string leader_name = "leader.tandem";
  std::string helper_name = "helper.tandem";
  // Server side (clients present no certificate) and the client certificate
  // of the collector channels; TLS unless tls.insecure_plaintext.
  TlsFiles tls;
  // Required: the Ed25519 signing key of the upload tickets, an unencrypted
  // PKCS#8 PEM (`openssl genpkey -algorithm ed25519 -out ticket.key`); the
  // aggregators get its public key (`openssl pkey -in ticket.key -pubout`).
  std::string ticket_key_path;
  std::string state_dir;  // holds coordinator.db, devices.db, models/<task>/v<N>.safetensors
  // Prometheus /metrics (plain HTTP) on the host of listen_address, and on
  // the same port the live dashboard: / (the tasks) and /tasks/<task_id>
  // (server/service/coordinator_dashboard.h): -1 = none, 0 = any free port.
  int metrics_port = -1;
  absl::Duration tick = absl::Milliseconds(50);
  size_t chunk_bytes = size_t{1} << 20;
  // host:port of a tandem-worker that receives each released model and
  // evaluates it (server/transport/worker_evaluator.h); empty = evaluate in
  // this process.
  std::string worker_address;
  // The worker's TLS identity and the roots verifying it (default: tls's
  // roots). With TLS the coordinator calls the worker over mutual TLS with
  // its own certificate; plaintext only to a loopback worker.
  std::string worker_name = "worker.tandem";
  std::string worker_ca_path;
  // Who may check in (server/core/device_registry.h). kEnrolled (default):
  // keys an operator enrolled, through the admin API's allow-list or an
  // enrollment token signed by one of enrollment_key_paths' keys (PEM
  // Ed25519 public keys; `tandem-admin token mint` signs with the private
  // half). kOpen: any key enrolls itself; refused unless listen_address is
  // loopback (one-host simulations). The registry lives in
  // state_dir/devices.db.
  DevicePolicy device_policy = DevicePolicy::kEnrolled;
  std::vector<std::string> enrollment_key_paths;
  absl::Duration checkin_max_skew = absl::Seconds(60);
  // Check-in limits (DeviceRegistryOptions): per enrolled device, after its
  // proof (default 5/s, bursts of 30), and per source address (0 = none).
  double checkin_rate_per_device = 5;
  double checkin_rate_per_address = 0;
  // The client listener's gRPC resources: concurrent streams per
  // connection, connection age and idle time, threads and memory of the
  // server (RPCs beyond them wait or get RESOURCE_EXHAUSTED).
  int max_concurrent_streams = 32;
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_idle = absl::Minutes(5);
  int max_threads = 128;
  size_t max_memory_bytes = size_t{512} << 20;
  // The operator API (proto CoordinatorAdmin) on its own listener; empty =
  // none. With TLS: mutual TLS (the tls files, client certificates verified
  // against tls.root_ca_path) and only admin_identities may call. In
  // plaintext: loopback only, no identity check.
  std::string admin_listen_address;
  std::vector<std::string> admin_identities;
  // PEM roots verifying the operators' client certificates (default:
  // tls.root_ca_path). Usually the coordinator operator's own CA, which the
  // roots of its outbound channels (the aggregators' CAs) need not include.
  std::string admin_ca_path;
  // Tasks (server/core/task_host.h): whether the command line's task runs
  // (false: only the task API's), its document when it came from one (the
  // registry shows it), the most tasks at once, and how an API task's MLP
  // gets its dataset by name ("digits", "fmnist"; null = such tasks are
  // refused with FAILED_PRECONDITION). API tasks live in
  // state_dir/tasks/<id>/, the registry in state_dir/tasks.db.
  bool boot_task = true;
  proto::TaskSpec boot_spec;
  size_t max_tasks = 64;
  std::function<absl::StatusOr<ml::Dataset>(const std::string& name)> load_dataset;
};

class CoordinatorDaemon {
 public:
  // INVALID_ARGUMENT for missing addresses/state_dir/ticket key, one
  // address or TLS name for both aggregators, or bad options; NOT_FOUND for
  // an unreadable ticket key; UNAVAILABLE when the port cannot be bound;
  // store errors as they come.
  static absl::StatusOr<std::unique_ptr<CoordinatorDaemon>> Start(
      CoordinatorDaemonOptions options, ml::Dataset eval_data, const Clock* clock,
      SecureRandom* random);
  ~CoordinatorDaemon();  // Shutdown()

  int port() const { return port_; }
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  int admin_port() const { return admin_port_; }
  DeviceRegistry& devices() { return *devices_; }
  // The command line's task (null when it does not run).
  std::shared_ptr<Coordinator> coordinator() { return tasks_->BootTask(); }
  TaskHost& tasks() { return *tasks_; }
  // Stops the driver and the servers (idempotent).
  void Shutdown();
  // SIGHUP: re-reads the certificates, keys and roots of both listeners and
  // of the channels to the aggregators and the worker
  // (TlsReloader::Reload: a set that fails validation keeps serving what it
  // had). OK under plaintext.
  absl::Status ReloadTls() { return tls_.Reload(); }

 private:
  CoordinatorDaemon() = default;
  // One task's coordinator over the store at `store_path`, with what every
  // task shares (devices, models directory, worker, ticket key,
  // aggregators): the command line's task and every API task.
  absl::StatusOr<TaskParts> MakeTask(CoordinatorOptions co, ml::Dataset eval,
                                     const std::string& store_path);
  // Builds an API task from its document (the TaskHost's factory).
  absl::StatusOr<TaskParts> BuildTask(const proto::TaskSpec& spec, const std::string& task_dir);
  // The operator API's listener, when options.admin_listen_address is set.
  absl::Status StartAdmin(const CoordinatorDaemonOptions& options);

  // First member: destroyed last, after every server and channel reading it.
  TlsReloader tls_;
  std::unique_ptr<GrpcAggregatorClient> leader_;
  std::unique_ptr<GrpcAggregatorClient> helper_;
  CoordinatorDaemonOptions options_;  // endpoints resolved; boot task moved out
  std::optional<crypto::Ed25519SigningKey> ticket_key_;
  const Clock* clock_ = nullptr;
  SecureRandom* random_ = nullptr;
  std::unique_ptr<DeviceStore> device_store_;  // outlives devices_
  std::unique_ptr<DeviceRegistry> devices_;    // outlives tasks_
  std::unique_ptr<TaskStore> task_store_;      // outlives tasks_
  std::unique_ptr<TaskHost> tasks_;
  RefusalCounters admin_refusals_;
  std::unique_ptr<CallerGate> admin_gate_;
  std::unique_ptr<CoordinatorAdminService> admin_service_;
  std::unique_ptr<TaskAdminService> task_admin_service_;
  std::unique_ptr<grpc::Server> admin_server_;
  int admin_port_ = 0;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  std::atomic<bool> stop_{false};
  int port_ = 0;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_COORDINATOR_DAEMON_H_
