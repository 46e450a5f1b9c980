#include "aggregator/service/daemon.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregator/core/postgres_store_factory.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/service/grpc_peer_channel.h"
#include "base/grpc_credentials.h"
#include "base/grpc_metrics.h"
#include "base/grpc_policy.h"
#include "base/logging.h"
#include "base/net_address.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

constexpr uint32_t kDefaultMaxTasks = 16;
// Collector requests are small (round parameters, ids); peer requests carry
// up to one verify batch of digests and verifier shares.
constexpr int kCollectorReceiveBytes = 1 << 20;
constexpr int kPeerReceiveBytes = 32 << 20;

TlsFiles TlsFilesFrom(const proto::TlsConfig& tls, bool require_client_cert,
                      TlsReloader* reloader) {
  return {tls.insecure_plaintext(), tls.cert_chain_path(), tls.private_key_path(),
          tls.root_ca_path(),       require_client_cert,   reloader};
}

int Capped(int64_t bytes, uint32_t cap) {
  if (cap != 0) bytes = std::min<int64_t>(bytes, cap);
  return static_cast<int>(std::min<int64_t>(bytes, INT32_MAX));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One listener with its services and limits; `port` receives the bound port.
absl::StatusOr<std::unique_ptr<grpc::Server>> Serve(
    const std::string& address, std::shared_ptr<grpc::ServerCredentials> creds,
    int receive_bytes, int send_bytes, const std::vector<grpc::Service*>& services, int* port,
    const std::shared_ptr<prometheus::Registry>& rpc_metrics) {
  grpc::ServerBuilder builder;
  if (rpc_metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(MakeRpcMetricsInterceptorFactory(rpc_metrics));
    builder.experimental().SetInterceptorCreators(std::move(counting));
  }
  builder.AddListeningPort(address, std::move(creds), port);
  rpc::ExclusiveListener(builder);
  // The sync server keeps at most MAX_POLLERS idle threads (gRPC's default:
  // 2) and ends every thread beyond them once its call returns, so a burst
  // of concurrent uploads (each waiting on a group commit) created and
  // ended about one thread per share: 795 thread creations in a 490-report
  // tandem-sim run. Up to kIdlePollers threads stay instead; the number of
  // busy ones is unchanged (one per call in progress).
  constexpr int kIdlePollers = 64;
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kIdlePollers);
  builder.SetMaxReceiveMessageSize(receive_bytes);
  builder.SetMaxSendMessageSize(send_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AggregatorDaemon>> AggregatorDaemon::Start(
    const proto::AggregatorConfig& config, Clock* clock, SecureRandom* noise_random,
    absl::Duration process_interval, const proto::AggregatorAdminConfig& admin) {
  TANDEM_RETURN_IF_ERROR(ValidateConfig(config));
  TANDEM_ASSIGN_OR_RETURN(Role role, ParseRole(config.role()));
  // The config's tasks and what the operator API provisioned before.
  TANDEM_ASSIGN_OR_RETURN(proto::ProvisionedTasks provisioned,
                          ReadProvisionedTasks(ProvisionedTasksPath(config.state_path())));
  TANDEM_ASSIGN_OR_RETURN(PolicySet policies, PoliciesWithProvisioned(config, provisioned));
  if (policies.open()) {
    TANDEM_LOG(WARNING) << "allow_unprovisioned_tasks: the coordinator may open rounds for any "
                           "task id, each with a budget of its own";
  } else {
    for (const std::string& t : policies.Tasks()) {
      TANDEM_LOG(INFO) << (policies.retired(t) ? "retired task " : "provisioned task ") << t
                       << " (population " << policies.PopulationOf(t) << ")";
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config.state_path(), ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state_path ", config.state_path(), ": ", ec.message()));
  }
  const bool plaintext = config.tls().insecure_plaintext();
  const uint32_t cap = config.max_message_bytes();
  const int upload_bytes = Capped(UploadLimitBytes(policies.MaxSentValues()), cap);
  const int share_bytes =
      Capped(static_cast<int64_t>(policies.MaxDimension()) * 8 + (1 << 20), 0);

  auto daemon = std::unique_ptr<AggregatorDaemon>(new AggregatorDaemon());
  const uint32_t max_tasks = config.max_tasks() != 0 ? config.max_tasks() : kDefaultMaxTasks;
  daemon->metrics_ =
      std::make_unique<AggregatorMetrics>(role, config.state_path(), max_tasks, &daemon->refusals_);
  AggregatorOptions options;
  options.role = role;
  if (config.idle_checkpoint_ms() != 0) {
    options.idle_checkpoint = config.idle_checkpoint_ms() < 0
                                  ? absl::InfiniteDuration()
                                  : absl::Milliseconds(config.idle_checkpoint_ms());
  }
  if (config.max_clock_skew_ms() != 0) {
    options.max_clock_skew = absl::Milliseconds(std::max<int64_t>(config.max_clock_skew_ms(), 0));
  }
  if (config.pending_share_cache_mib() != 0) {
    options.pending_share_cache_bytes =
        config.pending_share_cache_mib() < 0 ? 0 : config.pending_share_cache_mib() << 20;
  }
  options.max_dimension = std::min(options.max_dimension, policies.MaxDimension());
  options.policies = std::move(policies);
  if (!config.coordinator_public_key_path().empty()) {
    // "new.pub,old.pub": the first signs the coordinator's tickets now, the
    // others are accepted until their tickets expire (key rotation).
    const std::vector<std::string> paths =
        absl::StrSplit(config.coordinator_public_key_path(), ',', absl::SkipEmpty());
    for (size_t i = 0; i < paths.size(); ++i) {
      TANDEM_ASSIGN_OR_RETURN(std::string pem, ReadFile(paths[i]));
      TANDEM_ASSIGN_OR_RETURN(crypto::Ed25519VerifyingKey key,
                              crypto::Ed25519VerifyingKey::FromPem(pem));
      if (i == 0) {
        options.ticket_key = std::make_shared<const crypto::Ed25519VerifyingKey>(std::move(key));
      } else {
        options.previous_ticket_keys.push_back(std::move(key));
      }
    }
    options.require_device_bound_tickets = !config.allow_unbound_tickets();
    if (config.allow_unbound_tickets()) {
      TANDEM_LOG(WARNING) << "allow_unbound_tickets: a ticket read off the wire can be spent by "
                             "whoever holds it";
    }
  } else {
    TANDEM_LOG(WARNING) << "allow_unticketed_uploads: anyone who reaches the upload port can "
                           "submit reports";
  }
  if (role == Role::kLeader) {
    // Presents the leader's certificate: the helper's peer listener checks it.
    TANDEM_ASSIGN_OR_RETURN(
        auto creds, MakeChannelCredentials(TlsFilesFrom(config.tls(), false, &daemon->tls_)));
    grpc::ChannelArguments args = rpc::ChannelArgs();
    args.SetMaxReceiveMessageSize(kPeerReceiveBytes);
    args.SetMaxSendMessageSize(kPeerReceiveBytes);
    if (!config.peer().server_name().empty()) {
      args.SetSslTargetNameOverride(config.peer().server_name());
    }
    daemon->peer_ = std::make_unique<GrpcPeerChannel>(
        grpc::CreateCustomChannel(config.peer().address(), creds, args), rpc::kPeerCallDeadline);
    daemon->metered_peer_ =
        std::make_unique<MeteredPeerChannel>(daemon->peer_.get(), daemon->metrics_.get());
  }
  sqlite::DatabaseOptions db_options;
  if (config.relaxed_durability()) db_options.synchronous = sqlite::Synchronous::kNormal;
  StoreFactory stores;
  if (!config.postgres_conninfo().empty()) {
    // The connection string may hold a password: it is never logged.
    stores = MakePostgresStoreFactory(config.postgres_conninfo(), max_tasks, config.replica_id(),
                                      config.lease_ms() != 0 ? config.lease_ms() : 30000);
  } else if (config.segment_share_files()) {
    stores = MakeSegmentStoreFactory(config.state_path(), db_options, max_tasks);
  } else {
    stores = MakeSqliteStoreFactory(config.state_path(), db_options, max_tasks);
  }
  TANDEM_ASSIGN_OR_RETURN(daemon->aggregator_,
                          Aggregator::Create(options, std::move(stores),
                                             daemon->metered_peer_.get(), clock, noise_random));

  auto identities = [](const auto& list) { return std::vector<std::string>(list.begin(), list.end()); };
  daemon->collector_gate_ = std::make_unique<CallerGate>(
      "collector", identities(config.coordinator_identities()), !plaintext, &daemon->refusals_);
  daemon->peer_gate_ = std::make_unique<CallerGate>(
      "peer", identities(config.leader_identities()), !plaintext, &daemon->refusals_);
  daemon->upload_ = std::make_unique<UploadService>(daemon->aggregator_.get(), &daemon->refusals_,
                                                    daemon->metrics_.get());
  daemon->peer_service_ = std::make_unique<PeerService>(
      daemon->aggregator_.get(), daemon->peer_gate_.get(), daemon->metrics_.get());
  daemon->collector_ = std::make_unique<CollectorService>(
      daemon->aggregator_.get(), daemon->collector_gate_.get(), &daemon->refusals_,
      daemon->metrics_.get());

  // Internal APIs without their own address share the upload port
  // (plaintext on loopback only: ValidateConfig).
  const bool shared_collector = config.collector_listen_address().empty();
  const bool shared_peer = role == Role::kHelper && config.peer_listen_address().empty();
  std::vector<grpc::Service*> upload_services = {daemon->upload_.get()};
  int upload_receive = upload_bytes;
  if (shared_collector) upload_services.push_back(daemon->collector_.get());
  if (shared_peer) {
    upload_services.push_back(daemon->peer_service_.get());
    upload_receive = std::max(upload_receive, kPeerReceiveBytes);
  }
  // gRPC calls by method and code, on /metrics with the rest (when served).
  std::shared_ptr<prometheus::Registry> rpc_metrics;
  if (!config.metrics_listen_address().empty()) {
    rpc_metrics = std::make_shared<prometheus::Registry>();
  }
  TANDEM_ASSIGN_OR_RETURN(auto upload_creds,
                          MakeServerCredentials(TlsFilesFrom(config.tls(), false, &daemon->tls_)));
  TANDEM_ASSIGN_OR_RETURN(auto upload_server,
                          Serve(config.listen_address(), upload_creds, upload_receive,
                                shared_collector ? share_bytes : (1 << 20), upload_services,
                                &daemon->port_, rpc_metrics));
  daemon->servers_.push_back(std::move(upload_server));
  daemon->collector_port_ = daemon->port_;
  if (role == Role::kHelper) daemon->peer_port_ = daemon->port_;
  if (!shared_collector || !shared_peer) {
    TANDEM_ASSIGN_OR_RETURN(auto mutual,
                            MakeServerCredentials(TlsFilesFrom(config.tls(), true, &daemon->tls_)));
    if (!shared_collector) {
      TANDEM_ASSIGN_OR_RETURN(auto s, Serve(config.collector_listen_address(), mutual,
                                            kCollectorReceiveBytes, share_bytes,
                                            {daemon->collector_.get()}, &daemon->collector_port_,
                                            rpc_metrics));
      daemon->servers_.push_back(std::move(s));
    }
    if (role == Role::kHelper && !shared_peer) {
      TANDEM_ASSIGN_OR_RETURN(auto s, Serve(config.peer_listen_address(), mutual, kPeerReceiveBytes,
                                            kPeerReceiveBytes, {daemon->peer_service_.get()},
                                            &daemon->peer_port_, rpc_metrics));
      daemon->servers_.push_back(std::move(s));
    }
  }
  if (!admin.listen_address().empty()) {
    if (plaintext && !IsLoopbackAddress(admin.listen_address())) {
      return absl::InvalidArgumentError(
          absl::StrCat("a plaintext operator API is refused on the non-loopback address '",
                       admin.listen_address(), "'"));
    }
    if (!plaintext && admin.operator_identities().empty()) {
      return absl::InvalidArgumentError(
          "the operator API needs the operators' certificate identities (--operator_identity)");
    }
    TlsFiles tls = TlsFilesFrom(config.tls(), true, &daemon->tls_);
    if (!admin.operator_ca_path().empty()) tls.root_ca_path = admin.operator_ca_path();
    TANDEM_ASSIGN_OR_RETURN(auto admin_creds, MakeServerCredentials(tls));
    daemon->admin_gate_ = std::make_unique<CallerGate>(
        "admin", identities(admin.operator_identities()), !plaintext, &daemon->refusals_);
    daemon->admin_service_ = std::make_unique<AggregatorAdminService>(
        daemon->aggregator_.get(), daemon->admin_gate_.get(), config, std::move(provisioned));
    TANDEM_ASSIGN_OR_RETURN(
        auto s, Serve(admin.listen_address(), admin_creds, 1 << 20, 1 << 20,
                      {daemon->admin_service_.get()}, &daemon->admin_port_, rpc_metrics));
    daemon->servers_.push_back(std::move(s));
  }
  if (!config.metrics_listen_address().empty()) {
    TANDEM_ASSIGN_OR_RETURN(daemon->metrics_server_,
                            MetricsServer::Start(config.metrics_listen_address()));
    daemon->metrics_server_->Register(daemon->metrics_->registry());
    daemon->metrics_server_->Register(rpc_metrics);
    daemon->metrics_server_->Register(
        daemon->metrics_->StatusCollectable(daemon->aggregator_.get(), &daemon->stall_));
  }
  // The leader drives verification; a helper replica ticks too, for its
  // idle checkpoints.
  if (role == Role::kLeader || !config.replica_id().empty()) {
    daemon->loop_ = std::thread([d = daemon.get(), process_interval] { d->ProcessLoop(process_interval); });
  }
  TANDEM_LOG(INFO) << "tandem-aggregator " << RoleName(role) << " serving uploads on port "
                   << daemon->port_ << ", collector on " << daemon->collector_port_
                   << (role == Role::kHelper ? absl::StrCat(", peer on ", daemon->peer_port_) : "")
                   << (plaintext ? " (plaintext, no identity checks)" : " (TLS, roles checked)")
                   << (config.replica_id().empty()
                           ? ""
                           : absl::StrCat(", replica ", config.replica_id(),
                                          " over a shared PostgreSQL database"))
                   << "; upload receive limit " << upload_bytes << " bytes";
  return daemon;
}

void AggregatorDaemon::ProcessLoop(absl::Duration interval) {
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    const absl::Time start = absl::Now();
    if (aggregator_->role() == Role::kLeader) {
      stall_.ObserveAndLog(aggregator_->ProcessAllPending(), absl::Now());
    }
    if (absl::Status s = aggregator_->SaveIdlePartials(); !s.ok()) {
      TANDEM_VLOG(1) << "idle checkpoint: " << s;
    }
    if (metered_peer_ == nullptr) continue;
    // This pass's own work per batch: its time less the helper's, evenly.
    const MeteredPeerChannel::Pass pass = metered_peer_->TakePass();
    if (pass.batches > 0) {
      const absl::Duration local =
          std::max(absl::ZeroDuration(), absl::Now() - start - pass.peer_time) / pass.batches;
      for (int i = 0; i < pass.batches; ++i) metrics_->ObserveBatchSeconds(/*local=*/true, local);
    }
  }
}

void AggregatorDaemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (loop_.joinable()) loop_.join();
  for (auto& server : servers_) {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
}

AggregatorDaemon::~AggregatorDaemon() { Shutdown(); }

}  // namespace tandem::aggregator
