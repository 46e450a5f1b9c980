#include "server/service/coordinator_daemon.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/server_builder.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<CoordinatorDaemon>> CoordinatorDaemon::Start(
    CoordinatorDaemonOptions options, ml::Dataset eval_data, const Clock* clock,
    SecureRandom* random) {
  if (options.leader_address.empty() || options.helper_address.empty()) {
    return absl::InvalidArgumentError("leader and helper aggregator addresses are required");
  }
  if (options.state_dir.empty()) return absl::InvalidArgumentError("state_dir is required");
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
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> channel_creds,
                          MakeChannelCredentials(options.tls));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);  // released shares: 8 bytes x D
  d->leader_ = std::make_unique<GrpcAggregatorClient>(
      grpc::CreateCustomChannel(options.leader_address, channel_creds, args));
  d->helper_ = std::make_unique<GrpcAggregatorClient>(
      grpc::CreateCustomChannel(options.helper_address, channel_creds, args));
  // Unless configured otherwise, clients reach the aggregators where we do.
  CoordinatorOptions& co = options.coordinator;
  if (co.leader.address().empty()) co.leader.set_address(options.leader_address);
  if (co.helper.address().empty()) co.helper.set_address(options.helper_address);
  co.leader.set_tls(!options.tls.insecure_plaintext);
  co.helper.set_tls(!options.tls.insecure_plaintext);
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<CoordinatorStore> store,
      CoordinatorStore::Open((std::filesystem::path(options.state_dir) / "coordinator.db").string()));
  TANDEM_ASSIGN_OR_RETURN(d->coordinator_,
                          Coordinator::Create(std::move(co), std::move(eval_data), d->leader_.get(),
                                              d->helper_.get(), std::move(store), clock, random));
  d->service_ = std::make_unique<CoordinatorService>(d->coordinator_.get(), options.chunk_bytes);
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_creds,
                          MakeServerCredentials(options.tls));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, server_creds, &d->port_);
  builder.RegisterService(d->service_.get());
  builder.SetMaxReceiveMessageSize(1 << 20);  // requests are small
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr || d->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  if (options.metrics_port >= 0) {
    const size_t colon = options.listen_address.rfind(':');
    const std::string host =
        colon == std::string::npos ? "" : options.listen_address.substr(0, colon);
    Coordinator* c = d->coordinator_.get();
    TANDEM_ASSIGN_OR_RETURN(d->metrics_,
                            MetricsHttpServer::Start(host.empty() ? "127.0.0.1" : host,
                                                     options.metrics_port,
                                                     [c] { return c->MetricsText(); }));
  }
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
  metrics_.reset();
}

CoordinatorDaemon::~CoordinatorDaemon() { Shutdown(); }

}  // namespace tandem::server
