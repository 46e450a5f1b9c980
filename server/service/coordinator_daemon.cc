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
#include "base/logging.h"
#include "base/net_address.h"
#include "base/status_macros.h"
#include "crypto/sign/ed25519.h"
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
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                          MakeServerCredentials(admin_tls));
  admin_gate_ =
      std::make_unique<CallerGate>("admin", options.admin_identities, tls, &admin_refusals_);
  admin_service_ = std::make_unique<CoordinatorAdminService>(devices_.get(), coordinator_.get(),
                                                             admin_gate_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.admin_listen_address, creds, &admin_port_);
  builder.RegisterService(admin_service_.get());
  builder.SetMaxReceiveMessageSize(64 << 10);
  admin_server_ = builder.BuildAndStart();
  if (admin_server_ == nullptr || admin_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.admin_listen_address));
  }
  return absl::OkStatus();
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
  std::unique_ptr<CoordinatorDaemon> d(new CoordinatorDaemon());
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::Channel> leader_channel,
      MakeCollectorChannel(options.leader_address, options.tls, options.leader_name));
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::Channel> helper_channel,
      MakeCollectorChannel(options.helper_address, options.tls, options.helper_name));
  d->leader_ = std::make_unique<GrpcAggregatorClient>(std::move(leader_channel));
  d->helper_ = std::make_unique<GrpcAggregatorClient>(std::move(helper_channel));
  if (!options.worker_address.empty()) {
    WorkerEvaluatorOptions worker{.address = options.worker_address, .task_id = co.task_id};
    worker.tls = options.tls;
    worker.tls.require_client_cert = false;
    if (!options.worker_ca_path.empty()) worker.tls.root_ca_path = options.worker_ca_path;
    worker.server_name = options.worker_name;
    TANDEM_ASSIGN_OR_RETURN(d->worker_, WorkerEvaluator::Create(std::move(worker), eval_data));
    co.evaluator = d->worker_.get();
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<CoordinatorStore> store,
      CoordinatorStore::Open((std::filesystem::path(options.state_dir) / "coordinator.db").string()));
  TANDEM_ASSIGN_OR_RETURN(DeviceRegistryOptions registry_options, RegistryOptions(options));
  TANDEM_ASSIGN_OR_RETURN(
      d->device_store_,
      DeviceStore::Open((std::filesystem::path(options.state_dir) / "devices.db").string()));
  TANDEM_ASSIGN_OR_RETURN(d->devices_, DeviceRegistry::Create(std::move(registry_options),
                                                              d->device_store_.get(), clock));
  if (options.device_policy == DevicePolicy::kOpen) {
    TANDEM_LOG(WARNING) << "coordinator: open device enrollment (any key may check in; "
                           "one-host simulations only)";
  }
  co.devices = d->devices_.get();
  // Released models: state_dir/models/<task>/v<N>.safetensors (tandem-admin
  // task export reads them).
  co.models_dir = (std::filesystem::path(options.state_dir) / "models" / co.task_id).string();
  TANDEM_ASSIGN_OR_RETURN(d->coordinator_,
                          Coordinator::Create(std::move(co), std::move(ticket_key),
                                              std::move(eval_data), d->leader_.get(),
                                              d->helper_.get(), std::move(store), clock, random));
  d->service_ = std::make_unique<CoordinatorService>(d->coordinator_.get(), options.chunk_bytes);
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_creds,
                          MakeServerCredentials(options.tls));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, server_creds, &d->port_);
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
    d->metrics_->Register(MakeCoordinatorCollectable(d->coordinator_.get()));
    d->metrics_->Register(rpc_metrics);
  }
  TANDEM_RETURN_IF_ERROR(d->StartAdmin(options));
  d->driver_ = std::thread([dp = d.get(), tick = options.tick] { dp->Drive(tick); });
  return d;
}

void CoordinatorDaemon::Drive(absl::Duration tick) {
  while (!stop_) {
    if (absl::Status s = coordinator_->Tick(); !s.ok()) {
      TANDEM_LOG(ERROR) << "coordinator: " << s << " (retrying)";
    }
    absl::SleepFor(tick);
  }
}

void CoordinatorDaemon::Shutdown() {
  if (stop_.exchange(true)) return;
  if (driver_.joinable()) driver_.join();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (admin_server_) {
    admin_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  metrics_.reset();
}

CoordinatorDaemon::~CoordinatorDaemon() { Shutdown(); }

}  // namespace tandem::server
