#include "aggregator/service/daemon.h"

#include <filesystem>

#include <grpcpp/create_channel.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "base/grpc_credentials.h"
#include "aggregator/service/grpc_peer_channel.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

TlsFiles TlsFilesFrom(const proto::TlsConfig& tls) {
  return {tls.insecure_plaintext(), tls.cert_chain_path(), tls.private_key_path(),
          tls.root_ca_path(), tls.require_client_cert()};
}

constexpr uint32_t kDefaultMaxMessageBytes = 256u << 20;

}  // namespace

absl::Status ValidateConfig(const proto::AggregatorConfig& config) {
  TANDEM_ASSIGN_OR_RETURN(Role role, ParseRole(config.role()));
  if (config.listen_address().empty()) {
    return absl::InvalidArgumentError("listen_address is required");
  }
  if (config.state_path().empty()) return absl::InvalidArgumentError("state_path is required");
  if (role == Role::kLeader && config.peer().address().empty()) {
    return absl::InvalidArgumentError("the leader needs peer.address (its helper)");
  }
  const proto::TlsConfig& tls = config.tls();
  if (!tls.insecure_plaintext()) {
    if (tls.cert_chain_path().empty() || tls.private_key_path().empty()) {
      return absl::InvalidArgumentError(
          "tls.cert_chain_path and tls.private_key_path are required (or tls.insecure_plaintext)");
    }
    if ((tls.require_client_cert() || role == Role::kLeader) && tls.root_ca_path().empty()) {
      return absl::InvalidArgumentError("tls.root_ca_path is required to verify peers");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AggregatorDaemon>> AggregatorDaemon::Start(
    const proto::AggregatorConfig& config, Clock* clock, SecureRandom* noise_random,
    absl::Duration process_interval) {
  TANDEM_RETURN_IF_ERROR(ValidateConfig(config));
  TANDEM_ASSIGN_OR_RETURN(Role role, ParseRole(config.role()));
  std::error_code ec;
  std::filesystem::create_directories(config.state_path(), ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state_path ", config.state_path(), ": ", ec.message()));
  }
  const int max_bytes = static_cast<int>(
      config.max_message_bytes() != 0 ? config.max_message_bytes() : kDefaultMaxMessageBytes);

  auto daemon = std::unique_ptr<AggregatorDaemon>(new AggregatorDaemon());
  if (role == Role::kLeader) {
    TANDEM_ASSIGN_OR_RETURN(auto creds, MakeChannelCredentials(TlsFilesFrom(config.tls())));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(max_bytes);
    args.SetMaxSendMessageSize(max_bytes);
    if (!config.peer().server_name().empty()) {
      args.SetSslTargetNameOverride(config.peer().server_name());
    }
    daemon->peer_ = std::make_unique<GrpcPeerChannel>(
        grpc::CreateCustomChannel(config.peer().address(), creds, args), absl::Seconds(60));
  }
  AggregatorOptions options;
  options.role = role;
  sqlite::DatabaseOptions db_options;
  if (config.relaxed_durability()) db_options.synchronous = sqlite::Synchronous::kNormal;
  TANDEM_ASSIGN_OR_RETURN(daemon->aggregator_,
                          Aggregator::Create(options,
                                             MakeSqliteStoreFactory(config.state_path(), db_options),
                                             daemon->peer_.get(), clock, noise_random));
  daemon->upload_ = std::make_unique<UploadService>(daemon->aggregator_.get());
  daemon->peer_service_ = std::make_unique<PeerService>(daemon->aggregator_.get());
  daemon->collector_ = std::make_unique<CollectorService>(daemon->aggregator_.get());

  TANDEM_ASSIGN_OR_RETURN(auto server_creds, MakeServerCredentials(TlsFilesFrom(config.tls())));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen_address(), server_creds, &daemon->port_);
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  builder.RegisterService(daemon->upload_.get());
  builder.RegisterService(daemon->collector_.get());
  if (role == Role::kHelper) builder.RegisterService(daemon->peer_service_.get());
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr || daemon->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen_address()));
  }
  if (role == Role::kLeader) {
    daemon->loop_ = std::thread([d = daemon.get(), process_interval] { d->ProcessLoop(process_interval); });
  }
  TANDEM_LOG(INFO) << "tandem-aggregator " << RoleName(role) << " serving on port "
                   << daemon->port_ << (config.tls().insecure_plaintext() ? " (plaintext)" : " (TLS)");
  return daemon;
}

void AggregatorDaemon::ProcessLoop(absl::Duration interval) {
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    absl::Status s = aggregator_->ProcessAllPending();
    if (!s.ok()) TANDEM_VLOG(1) << "verification pass: " << s;
  }
}

void AggregatorDaemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (loop_.joinable()) loop_.join();
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

AggregatorDaemon::~AggregatorDaemon() { Shutdown(); }

}  // namespace tandem::aggregator
