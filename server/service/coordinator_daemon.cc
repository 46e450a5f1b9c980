#include "server/service/coordinator_daemon.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/grpc_metrics.h"
#include "base/grpc_policy.h"
#include "base/logging.h"
#include "base/net_address.h"
#include "base/status_macros.h"
#include "crypto/sign/ed25519.h"
#include "server/core/task_spec.h"
#include "server/service/coordinator_dashboard.h"
#include "server/service/coordinator_metrics.h"

namespace tandem::server {
namespace {

// The ticket signing key from its PEM file (secret: never logged).
// The contents of a key file; NOT_FOUND naming `what` when unreadable.
absl::StatusOr<std::string> ReadKeyFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " at ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

absl::StatusOr<crypto::Ed25519SigningKey> ReadTicketKey(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "the upload-ticket signing key is required (--ticket_key=PATH: an Ed25519 PKCS#8 PEM "
        "from `openssl genpkey -algorithm ed25519 -out ticket.key`; the aggregators get "
        "`openssl pkey -in ticket.key -pubout`)");
  }
  TANDEM_ASSIGN_OR_RETURN(const std::string pem, ReadKeyFile(path, "ticket key"));
  absl::StatusOr<crypto::Ed25519SigningKey> key = crypto::Ed25519SigningKey::FromPem(pem);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the ticket key at ", path,
                                                   " is not an Ed25519 PKCS#8 PEM: ",
                                                   key.status().message()));
  }
  std::error_code ec;
  const std::filesystem::perms p = std::filesystem::status(path, ec).permissions();
  if (!ec && (p & (std::filesystem::perms::group_read | std::filesystem::perms::others_read)) !=
                 std::filesystem::perms::none) {
    TANDEM_LOG(WARNING) << "coordinator: the ticket key " << path
                        << " is readable by group/others (chmod 600 it)";
  }
  return key;
}

// The aggregators' addresses and names, and the endpoints clients get.
absl::Status ResolveEndpoints(const CoordinatorDaemonOptions& o, CoordinatorOptions* co) {
  if (o.leader_address.empty() || o.helper_address.empty()) {
    return absl::InvalidArgumentError("leader and helper aggregator addresses are required");
  }
  if (absl::AsciiStrToLower(o.leader_address) == absl::AsciiStrToLower(o.helper_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader and helper are the same address ", o.leader_address,
        ": the two aggregators must be different servers"));
  }
  const bool tls = !o.tls.insecure_plaintext;
  if (tls) {
    if (o.leader_name.empty() || o.helper_name.empty()) {
      return absl::InvalidArgumentError(
          "the aggregators' TLS identities (--leader_name, --helper_name) are required with TLS");
    }
    if (absl::AsciiStrToLower(o.leader_name) == absl::AsciiStrToLower(o.helper_name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "leader and helper have the same TLS name ", o.leader_name,
          ": the two aggregators must be different identities"));
    }
    if (co->leader.address().empty() || co->helper.address().empty()) {
      return absl::InvalidArgumentError(
          "with TLS the aggregators' upload addresses (--announce_leader, --announce_helper) "
          "are required: --leader/--helper are their collector listeners, which clients "
          "cannot call");
    }
    co->leader.set_server_name(o.leader_name);
    co->helper.set_server_name(o.helper_name);
  } else {
    // Plaintext is for local runs only: loopback addresses everywhere.
    for (const std::string* a : {&o.listen_address, &o.leader_address, &o.helper_address}) {
      if (!IsLoopbackAddress(*a)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--insecure_plaintext is refused for the non-loopback address '", *a,
            "': plaintext is for local runs only"));
      }
    }
    // Plaintext (loopback): the aggregators may serve every API on one port.
    if (co->leader.address().empty()) co->leader.set_address(o.leader_address);
    if (co->helper.address().empty()) co->helper.set_address(o.helper_address);
    co->leader.clear_server_name();
    co->helper.clear_server_name();
  }
  co->leader.set_tls(tls);
  co->helper.set_tls(tls);
  if (absl::AsciiStrToLower(co->leader.address()) ==
      absl::AsciiStrToLower(co->helper.address())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader and helper are announced at the same upload address ", co->leader.address(),
        ": one server would receive both shares of every report"));
  }
  return absl::OkStatus();
}

// The device registry's options: policy checks and the operators' keys.
absl::StatusOr<DeviceRegistryOptions> RegistryOptions(const CoordinatorDaemonOptions& o) {
  DeviceRegistryOptions r;
  r.policy = o.device_policy;
  r.max_skew = o.checkin_max_skew;
  r.checkin_rate = o.checkin_rate_per_device;
  r.checkin_burst = 30;
  r.address_rate = o.checkin_rate_per_address;
  r.address_burst = std::max(1.0, 4 * o.checkin_rate_per_address);
  if (o.device_policy == DevicePolicy::kOpen && !IsLoopbackAddress(o.listen_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "open device enrollment admits any key (Sybils); it is refused on the non-loopback "
        "address '",
        o.listen_address, "': enroll devices (tandem-admin) instead"));
  }
  for (const std::string& path : o.enrollment_key_paths) {
    TANDEM_ASSIGN_OR_RETURN(const std::string pem, ReadKeyFile(path, "enrollment key"));
    absl::StatusOr<crypto::Ed25519VerifyingKey> key = crypto::Ed25519VerifyingKey::FromPem(pem);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the enrollment key at ", path,
                       " is not an Ed25519 public key PEM: ", key.status().message()));
    }
    r.enrollment_keys.push_back(*std::move(key));
  }
  return r;
}

}  // namespace

absl::Status CoordinatorDaemon::StartAdmin(const CoordinatorDaemonOptions& options) {
  if (options.admin_listen_address.empty()) return absl::OkStatus();
  const bool tls = !options.tls.insecure_plaintext;
  if (!tls && !IsLoopbackAddress(options.admin_listen_address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a plaintext admin listener is refused on the non-loopback address '",
                     options.admin_listen_address, "'"));
  }
  if (tls && options.admin_identities.empty()) {
    return absl::InvalidArgumentError(
        "the admin listener needs the operators' certificate identities (--admin_identities)");
  }
  TlsFiles admin_tls = options.tls;
  admin_tls.require_client_cert = tls;
  if (!options.admin_ca_path.empty()) admin_tls.root_ca_path = options.admin_ca_path;
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                          MakeServerCredentials(admin_tls));
  admin_gate_ =
      std::make_unique<CallerGate>("admin", options.admin_identities, tls, &admin_refusals_);
  admin_service_ =
      std::make_unique<CoordinatorAdminService>(devices_.get(), tasks_.get(), admin_gate_.get());
  task_admin_service_ = std::make_unique<TaskAdminService>(tasks_.get(), admin_gate_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.admin_listen_address, creds, &admin_port_);
  rpc::ExclusiveListener(builder);
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(task_admin_service_.get());
  // CreateTask carries an opaque model's weights (at most 48 MiB); only
  // certificate holders reach this listener, and the gate runs first in
  // every handler.
  builder.SetMaxReceiveMessageSize(49 << 20);
  admin_server_ = builder.BuildAndStart();
  if (admin_server_ == nullptr || admin_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.admin_listen_address));
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskParts> CoordinatorDaemon::MakeTask(CoordinatorOptions co, ml::Dataset eval,
                                                      const std::string& store_path) {
  // What no document sets: the device registry, where released models go
  // (state_dir/models/<task>, which tandem-admin task export reads) and the
  // worker that evaluates them.
  co.devices = devices_.get();
  co.models_dir = (std::filesystem::path(options_.state_dir) / "models" / co.task_id).string();
  TaskParts parts;
  if (!options_.worker_address.empty()) {
    WorkerEvaluatorOptions worker{.address = options_.worker_address, .task_id = co.task_id};
    worker.tls = options_.tls;
    worker.tls.require_client_cert = false;
    if (!options_.worker_ca_path.empty()) worker.tls.root_ca_path = options_.worker_ca_path;
    worker.server_name = options_.worker_name;
    TANDEM_ASSIGN_OR_RETURN(parts.evaluator, WorkerEvaluator::Create(std::move(worker), eval));
    co.evaluator = parts.evaluator.get();
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorStore> store,
                          CoordinatorStore::Open(store_path));
  TANDEM_ASSIGN_OR_RETURN(
      parts.coordinator,
      Coordinator::Create(std::move(co), *ticket_key_, std::move(eval), leader_.get(),
                          helper_.get(), std::move(store), clock_, random_));
  return parts;
}

absl::StatusOr<TaskParts> CoordinatorDaemon::BuildTask(const proto::TaskSpec& spec,
                                                       const std::string& task_dir) {
  TANDEM_ASSIGN_OR_RETURN(TaskFromSpec t, TaskOptionsFromSpec(spec, task_dir));
  CoordinatorOptions co = std::move(t.options);
  co.leader = options_.coordinator.leader;
  co.helper = options_.coordinator.helper;
  ml::Dataset eval;
  if (!t.dataset.empty()) {
    if (!options_.load_dataset) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task_spec.model.dataset: this coordinator loads no dataset for an MLP task"));
    }
    TANDEM_ASSIGN_OR_RETURN(eval, options_.load_dataset(t.dataset));
    TANDEM_RETURN_IF_ERROR(FitModelToDataset(eval, &co.model));
  }
  return MakeTask(std::move(co), std::move(eval),
                  (std::filesystem::path(task_dir) / "coordinator.db").string());
}

absl::StatusOr<std::unique_ptr<CoordinatorDaemon>> CoordinatorDaemon::Start(
    CoordinatorDaemonOptions options, ml::Dataset eval_data, const Clock* clock,
    SecureRandom* random) {
  CoordinatorOptions& co = options.coordinator;
  TANDEM_RETURN_IF_ERROR(ResolveEndpoints(options, &co));
  if (options.state_dir.empty()) return absl::InvalidArgumentError("state_dir is required");
  TANDEM_ASSIGN_OR_RETURN(crypto::Ed25519SigningKey ticket_key,
                          ReadTicketKey(options.ticket_key_path));
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create state_dir ", options.state_dir, ": ", ec.message()));
  }
  if (options.chunk_bytes < 1024 || options.chunk_bytes > (size_t{1} << 20)) {
    return absl::InvalidArgumentError("chunk_bytes must be in [1 KiB, 1 MiB]");
  }
  const std::filesystem::path state(options.state_dir);
  std::unique_ptr<CoordinatorDaemon> d(new CoordinatorDaemon());
  // Every listener and channel below takes its TLS material from d->tls_.
  options.tls.reloader = &d->tls_;
  d->options_ = options;  // endpoints resolved
  d->ticket_key_ = std::move(ticket_key);
  d->clock_ = clock;
  d->random_ = random;
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::Channel> leader_channel,
      MakeCollectorChannel(options.leader_address, options.tls, options.leader_name));
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::Channel> helper_channel,
      MakeCollectorChannel(options.helper_address, options.tls, options.helper_name));
  d->leader_ = std::make_unique<GrpcAggregatorClient>(std::move(leader_channel));
  d->helper_ = std::make_unique<GrpcAggregatorClient>(std::move(helper_channel));
  TANDEM_ASSIGN_OR_RETURN(DeviceRegistryOptions registry_options, RegistryOptions(options));
  TANDEM_ASSIGN_OR_RETURN(d->device_store_, DeviceStore::Open((state / "devices.db").string()));
  TANDEM_ASSIGN_OR_RETURN(d->devices_, DeviceRegistry::Create(std::move(registry_options),
                                                              d->device_store_.get(), clock));
  if (options.device_policy == DevicePolicy::kOpen) {
    TANDEM_LOG(WARNING) << "coordinator: open device enrollment (any key may check in; "
                           "one-host simulations only)";
  }
  TANDEM_ASSIGN_OR_RETURN(d->task_store_, TaskStore::Open((state / "tasks.db").string()));
  TaskHostOptions host;
  host.devices = d->devices_.get();
  host.store = d->task_store_.get();
  host.tasks_dir = (state / "tasks").string();
  host.models_root = (state / "models").string();
  host.factory = [dp = d.get()](const proto::TaskSpec& spec, const std::string& dir) {
    return dp->BuildTask(spec, dir);
  };
  host.clock = clock;
  host.tick = options.tick;
  host.max_tasks = options.max_tasks;
  TANDEM_ASSIGN_OR_RETURN(d->tasks_, TaskHost::Create(std::move(host)));
  // The command line's task keeps the layout it always had: its store is
  // state_dir/coordinator.db, its released models state_dir/models/<task>.
  if (options.boot_task) {
    TANDEM_ASSIGN_OR_RETURN(TaskParts parts, d->MakeTask(co, std::move(eval_data),
                                                         (state / "coordinator.db").string()));
    TANDEM_RETURN_IF_ERROR(d->tasks_->Adopt(std::move(parts), options.boot_spec));
  }
  d->service_ = std::make_unique<CoordinatorService>(d->tasks_.get(), options.chunk_bytes);
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_creds,
                          MakeServerCredentials(options.tls));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, server_creds, &d->port_);
  rpc::ExclusiveListener(builder);
  builder.RegisterService(d->service_.get());
  auto rpc_metrics = std::make_shared<prometheus::Registry>();
  if (options.metrics_port >= 0) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(MakeRpcMetricsInterceptorFactory(rpc_metrics));
    builder.experimental().SetInterceptorCreators(std::move(counting));
  }
  builder.SetMaxReceiveMessageSize(1 << 20);  // requests are small
  // The public listener's resources are bounded (issue 34 item 3).
  grpc::ResourceQuota quota("tandem-coordinator-clients");
  quota.SetMaxThreads(options.max_threads);
  quota.Resize(options.max_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_AGE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age)));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_idle)));
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr || d->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  if (options.metrics_port >= 0) {
    const size_t colon = options.listen_address.rfind(':');
    std::string host = colon == std::string::npos ? "" : options.listen_address.substr(0, colon);
    if (host.empty() || host == "localhost") host = "127.0.0.1";
    TANDEM_ASSIGN_OR_RETURN(d->metrics_,
                            MetricsServer::Start(absl::StrCat(host, ":", options.metrics_port)));
    d->metrics_->Register(MakeCoordinatorCollectable(d->tasks_.get()));
    d->metrics_->Register(rpc_metrics);
    // The live dashboard beside /metrics: /, /tasks/<id> (aggregates only,
    // as /metrics; server/service/coordinator_dashboard.h).
    RegisterCoordinatorDashboard(d->tasks_.get(), d->metrics_.get());
  }
  TANDEM_RETURN_IF_ERROR(d->StartAdmin(options));
  // Every task's driver, the registry's API tasks re-created first.
  TANDEM_RETURN_IF_ERROR(d->tasks_->Start());
  return d;
}

void CoordinatorDaemon::Shutdown() {
  if (stop_.exchange(true)) return;
  // Listeners first (no task API call runs while the drivers stop).
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (admin_server_) {
    admin_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  if (tasks_) tasks_->Stop();
  metrics_.reset();
}

CoordinatorDaemon::~CoordinatorDaemon() { Shutdown(); }

}  // namespace tandem::server
