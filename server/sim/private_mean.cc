#include "server/sim/private_mean.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "base/grpc_policy.h"
#include "base/random.h"
#include "base/seed_mix.h"
#include "base/status_macros.h"
#include "client/internal/device_identity.h"
#include "client/transport/grpc_uploader.h"
#include "crypto/sign/upload_ticket.h"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_arena.h"
#include "server/core/upload_baselines.h"
#include "server/transport/grpc_aggregator_client.h"
#include "tests/testing/certificates.h"

namespace tandem::sim {
namespace {

// Shares in flight at once. An upload mostly waits (on the aggregator's
// fsync'd group commit, which takes every share queued meanwhile), so many
// more than the cores; 8 left the daemons' cores idle between commits.
constexpr int kUploaders = 32;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A channel to `target`: plaintext without certificates, else TLS verifying
// `server_name` against ca.pem, presenting the coordinator's certificate
// when `as_coordinator` (the collector listeners require it).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& target, const std::string& certs_dir,
                                          const std::string& server_name, bool as_coordinator) {
  grpc::ChannelArguments args = rpc::ChannelArgs();
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  if (certs_dir.empty()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(testing::RootsFile(certs_dir, "coordinator"));
  if (as_coordinator) {
    o.pem_cert_chain = ReadFile(certs_dir + "/coordinator.pem");
    o.pem_private_key = ReadFile(certs_dir + "/coordinator.key");
  }
  args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(o), args);
}

// The channels of PrivateMean, one per (target, certificates, name, role):
// every round of a run reuses its connections (a fresh channel a round cost
// four TLS handshakes, 20-60 ms of each round's aggregation). Leaked, so
// that it outlives every caller; thread-safe.
struct ChannelCache {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels ABSL_GUARDED_BY(mu);
};

ChannelCache& Channels() {
  static ChannelCache* const cache = new ChannelCache;
  return *cache;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& target, const std::string& certs_dir,
                                       const std::string& server_name, bool as_coordinator) {
  ChannelCache& cache = Channels();
  const std::string key =
      absl::StrCat(target, "|", certs_dir, "|", server_name, "|", as_coordinator ? 1 : 0);
  absl::MutexLock lock(&cache.mu);
  std::shared_ptr<grpc::Channel>& channel = cache.channels[key];
  if (channel == nullptr) channel = NewChannel(target, certs_dir, server_name, as_coordinator);
  return channel;
}

// One client's report as a device makes it: a ticket the coordinator signs
// (its id is the report id), the device's own key named in it, the PREAMBLE
// key shares and norm proof, and both requests signed by the device.
absl::StatusOr<EncodedReport> EncodeOne(const client::ReportBuilder& builder,
                                        const std::string& task_id, uint64_t round,
                                        absl::Span<const float> update,
                                        const crypto::Ed25519SigningKey* ticket_key,
                                        absl::Time expiry, SecureRandom* rng) {
  proto::UploadTicket ticket;
  ticket.set_task_id(task_id);
  ticket.set_round_id(round);
  ticket.mutable_ticket_id()->resize(16);
  TANDEM_RETURN_IF_ERROR(rng->Fill(
      absl::MakeSpan(reinterpret_cast<uint8_t*>(ticket.mutable_ticket_id()->data()), 16)));
  ticket.set_expiry_unix_ms(absl::ToUnixMillis(expiry));
  std::optional<crypto::Ed25519SigningKey> device;
  proto::SignedUploadTicket signed_ticket;
  if (ticket_key != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(device, crypto::Ed25519SigningKey::Generate(rng));
    ticket.set_device_public_key(device->PublicKeyRaw());
    TANDEM_ASSIGN_OR_RETURN(signed_ticket, crypto::SignUploadTicket(*ticket_key, ticket));
  }
  TANDEM_ASSIGN_OR_RETURN(client::BuiltReport report,
                          builder.Build(update, rng, ticket.ticket_id()));
  client::UploadRequests requests =
      client::MakeUploadRequests(std::move(report), task_id, round, signed_ticket);
  if (device.has_value()) {
    TANDEM_RETURN_IF_ERROR(client::SignUploadRequests(*device, &requests));
  }
  return EncodedReport{std::move(requests.to_leader), std::move(requests.to_helper)};
}

}  // namespace

absl::Status EncodeReportsEach(
    const client::ReportBuilder& builder, const std::string& task_id, uint64_t round,
    const std::vector<std::vector<float>>& updates, const crypto::Ed25519SigningKey* ticket_key,
    absl::Time expiry, uint64_t crypto_seed, int max_threads,
    absl::FunctionRef<void(size_t, absl::StatusOr<EncodedReport>)> ready) {
  if (max_threads < 1) return absl::InvalidArgumentError("max_threads must be >= 1");
  tbb::task_arena arena(max_threads);
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, updates.size(), 1), [&](const tbb::blocked_range<size_t>& r) {
          for (size_t i = r.begin(); i != r.end(); ++i) {
            // Report i's randomness depends on (seed, round, i) only, so any
            // thread count builds the same bytes.
            std::unique_ptr<DeterministicRandom> seeded;
            SecureRandom* rng = OpenSslRandom::Default();  // thread-safe
            if (crypto_seed != 0) {
              seeded = DeterministicRandom::FromSeed(StreamSeed(crypto_seed, round, i));
              rng = seeded.get();
            }
            ready(i, EncodeOne(builder, task_id, round, updates[i], ticket_key, expiry, rng));
          }
        });
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EncodedReport>> EncodeReports(
    const client::ReportBuilder& builder, const std::string& task_id, uint64_t round,
    const std::vector<std::vector<float>>& updates, const crypto::Ed25519SigningKey* ticket_key,
    absl::Time expiry, uint64_t crypto_seed, int max_threads) {
  const size_t n = updates.size();
  std::vector<std::optional<EncodedReport>> out(n);
  std::vector<absl::Status> errors(n);
  TANDEM_RETURN_IF_ERROR(EncodeReportsEach(
      builder, task_id, round, updates, ticket_key, expiry, crypto_seed, max_threads,
      [&](size_t i, absl::StatusOr<EncodedReport> e) {  // slot i is this call's alone
        if (e.ok()) {
          out[i] = *std::move(e);
        } else {
          errors[i] = e.status();
        }
      }));
  std::vector<EncodedReport> reports;
  reports.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) return errors[i];  // the first client's error, as a serial run
    reports.push_back(*std::move(out[i]));
  }
  return reports;
}

void CloseAggregatorChannels() {
  ChannelCache& cache = Channels();
  absl::MutexLock lock(&cache.mu);
  cache.channels.clear();
}

// The coordinator's side of the aggregators: the collector listeners, as
// coordinator.tandem.
server::GrpcAggregatorClient CollectorClient(const AggregatorEndpoints& ep, bool leader) {
  const std::string& target = leader ? ep.leader : ep.helper;
  const std::string& collector = leader ? ep.leader_collector : ep.helper_collector;
  return server::GrpcAggregatorClient(Channel(collector.empty() ? target : collector, ep.certs_dir,
                                              leader ? "leader.tandem" : "helper.tandem",
                                              /*as_coordinator=*/true));
}

absl::Status OpenPrivateRound(const server::SecureSum& sum, uint64_t round,
                              const AggregatorEndpoints& ep) {
  server::GrpcAggregatorClient leader = CollectorClient(ep, /*leader=*/true);
  server::GrpcAggregatorClient helper = CollectorClient(ep, /*leader=*/false);
  return sum.Open(leader, helper, round);
}

// server/sim/private_mean.h (shared with model_federation.cc).
absl::StatusOr<std::vector<float>> PrivateMean(const FederationOptions& o,
                                               const server::SecureSum& sum, uint64_t round,
                                               const std::vector<std::vector<float>>& updates,
                                               const AggregatorEndpoints& ep, RoundRecord* rec,
                                               bool round_open) {
  server::GrpcAggregatorClient leader = CollectorClient(ep, /*leader=*/true);
  server::GrpcAggregatorClient helper = CollectorClient(ep, /*leader=*/false);
  if (!round_open) {
    const absl::Time open_start = absl::Now();
    TANDEM_RETURN_IF_ERROR(sum.Open(leader, helper, round));
    rec->aggregate_seconds += absl::ToDoubleSeconds(absl::Now() - open_start);
  }
  // The coordinator signs one upload ticket per report (its id is the
  // report id), as tandem-coordinator does at check-in.
  std::optional<crypto::Ed25519SigningKey> ticket_key;
  if (!ep.certs_dir.empty()) {
    TANDEM_ASSIGN_OR_RETURN(
        ticket_key, crypto::Ed25519SigningKey::FromPem(ReadFile(ep.certs_dir + "/ticket.key")));
  }
  // What a client learns of the round: its announced parameters.
  const proto::RoundParameters params = sum.RoundParameters(round);
  TANDEM_ASSIGN_OR_RETURN(client::ReportBuilder builder,
                          client::ReportBuilder::Create(client::ReportParametersFromRound(params)));
  // Encoding (every core, oneTBB) and uploads (kUploaders threads, mostly
  // waiting on the daemons) overlap: a report goes up as soon as it is
  // built, as devices' reports arrive while others still train. The
  // aggregate does not depend on the order (each server adds its shares).
  client::GrpcUploader uploader(Channel(ep.leader, ep.certs_dir, "leader.tandem", false),
                                Channel(ep.helper, ep.certs_dir, "helper.tandem", false),
                                RealClock::Default());
  const size_t n = updates.size();
  std::vector<std::optional<EncodedReport>> reports(n);
  std::vector<uint64_t> report_bytes(n, 0);  // slot i: report i's two requests, set at encode
  std::vector<absl::Status> encode_errors(n);
  // Each report's two shares go up independently (a device may send them
  // at once): job 2i is report i's leader share, 2i + 1 its helper share.
  std::vector<absl::Status> upload_errors(2 * n);
  absl::Mutex mu;
  std::deque<size_t> jobs;     // guarded by mu: shares ready to upload
  bool encoding_done = false;  // guarded by mu
  const auto has_work = [&] { return !jobs.empty() || encoding_done; };
  const auto upload = [&] {
    while (true) {
      size_t job;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(&has_work));
        if (jobs.empty()) return;
        job = jobs.front();
        jobs.pop_front();
      }
      // Each job owns its share: sent, then freed on this (mostly waiting)
      // thread, as a device drops a request once it is delivered, instead
      // of all of a round's on the coordinator's path to Finalize.
      EncodedReport& r = *reports[job / 2];
      proto::UploadRequest sent;
      if (job % 2 == 0) {
        upload_errors[job] = uploader.UploadToLeader(r.leader);
        sent.Swap(&r.leader);
      } else {
        upload_errors[job] = uploader.UploadToHelper(r.helper);
        sent.Swap(&r.helper);
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min<size_t>(kUploaders, 2 * n); ++t) threads.emplace_back(upload);
  const absl::Time t0 = absl::Now();
  absl::Status encoded = EncodeReportsEach(
      builder, sum.config().task_id, round, updates,
      ticket_key.has_value() ? &*ticket_key : nullptr, absl::Now() + absl::Minutes(30),
      o.crypto_seed,
      o.client_threads > 0 ? o.client_threads : tbb::this_task_arena::max_concurrency(),
      [&](size_t i, absl::StatusOr<EncodedReport> e) {
        if (!e.ok()) {
          encode_errors[i] = e.status();
          return;
        }
        report_bytes[i] = e->leader.ByteSizeLong() + e->helper.ByteSizeLong();
        reports[i] = *std::move(e);  // slot i is written here once, read after the push
        absl::MutexLock lock(&mu);
        jobs.push_back(2 * i);
        jobs.push_back(2 * i + 1);
      });
  {
    absl::MutexLock lock(&mu);
    encoding_done = true;
  }
  // What encoding took (the uploads ran beside it); the aggregation phase
  // is what the uploads and the finalization add after it.
  const absl::Time t1 = absl::Now();
  rec->encode_seconds += absl::ToDoubleSeconds(t1 - t0);
  for (std::thread& t : threads) t.join();
  TANDEM_RETURN_IF_ERROR(encoded);
  for (const absl::Status& s : encode_errors) TANDEM_RETURN_IF_ERROR(s);  // the first client's
  for (const absl::Status& s : upload_errors) TANDEM_RETURN_IF_ERROR(s);
  const uint32_t value_bits = params.group_parameters().value_bits();
  rec->encoding = std::string(server::ReportEncodingName(params.encoding()));
  for (size_t i = 0; i < n; ++i) {
    rec->bytes_up += report_bytes[i];
    rec->clear_bytes_up += server::ClearFedAvgBytes(updates[i].size());
    rec->dense_bytes_up += server::DenseSharingBytes(updates[i].size(), value_bits);
  }
  TANDEM_ASSIGN_OR_RETURN(server::DecodedAggregate agg, sum.Finalize(leader, helper, round));
  rec->aggregate_seconds += absl::ToDoubleSeconds(absl::Now() - t1);
  rec->accepted_reports = agg.reports;
  return agg.mean;
}

absl::StatusOr<std::vector<float>> RoundMean(const FederationOptions& o,
                                             const server::SecureSum& sum, uint64_t round,
                                             const std::vector<std::vector<float>>& updates,
                                             const AggregatorEndpoints& ep, RoundRecord* rec,
                                             bool round_open) {
  if (updates.empty()) return absl::InvalidArgumentError("a round needs at least one update");
  if (o.private_aggregation) return PrivateMean(o, sum, round, updates, ep, rec, round_open);
  const absl::Time start = absl::Now();
  std::vector<float> mean(updates[0].size(), 0.f);
  for (const auto& u : updates) {
    for (size_t i = 0; i < u.size(); ++i) mean[i] += u[i] / updates.size();
    rec->bytes_up += u.size() * sizeof(float);
    rec->clear_bytes_up += server::ClearFedAvgBytes(u.size());
    rec->dense_bytes_up += server::DenseSharingBytes(u.size(), sum.config().value_bits);
  }
  rec->accepted_reports = updates.size();
  rec->aggregate_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  return mean;
}

}  // namespace tandem::sim
