// A round's private encoding as tandem-sim does it (EncodeReports: clip,
// fixed point, PREAMBLE key shares, norm proofs, ticket and device
// signatures) at the main job's DP settings: the MLP 784-32-10 (D = 25,450),
// B = 256, one of 2 blocks per group (k = 50, 12,800 values sent), norm
// proofs on, 100 clients a round (q = 0.05 of 2,000). Arg: threads. The
// clear FedAvg baseline of the same round is BM_ClearMean (what the
// simulator does for it: the float mean of the updates).
// BM_ServerRound: what both aggregators compute for the same round, on one
// thread, with no transport, storage or scheduling: per upload the ticket
// and device signature checks, validation, the stored blob and its content
// digest (Aggregator::Upload's steps; the share itself is parsed by gRPC,
// which is transport, so the parsed shares are made once, outside the
// loop), then each server's verification pass (one evaluation per report
// into the accumulator, FLP query), the decisions, and each server's noise
// for the release (noise multiplier 1.0, as part 2 of the main job). With
// BM_EncodeRound/1 and the clear run's training it is the compute floor of
// a private update (issue 36 item 4, bench/README.md).
#include <cmath>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/norm_verification.h"
#include "aggregator/core/round_codec.h"
#include "aggregator/core/task.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/dp/discrete_gaussian.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"
#include "server/core/secure_sum.h"
#include "server/sim/private_mean.h"

namespace tandem::sim {
namespace {

constexpr size_t kDim = 25450;
constexpr size_t kClients = 100;

std::vector<std::vector<float>> Updates() {
  std::vector<std::vector<float>> updates;
  for (size_t i = 0; i < kClients; ++i) {
    std::vector<float> u(kDim);
    for (size_t j = 0; j < kDim; ++j) u[j] = 0.002f * std::sin(0.37f * (i + 1) + 0.01f * j);
    updates.push_back(std::move(u));
  }
  return updates;
}

// Round 1 of the main job's DP task (part 2: noise multiplier 1.0 per
// aggregator; the encoding does not depend on it).
proto::RoundParameters MainJobRound() {
  server::SecureSumConfig c;
  c.task_id = "bench";
  c.model_dimension = kDim;
  c.block_size = 256;
  c.log_blocks_per_group = 1;
  c.norm_proofs = true;
  c.noise_multiplier = 1.0;
  return server::SecureSum::Create(c).value().RoundParameters(1);
}

void BM_EncodeRound(benchmark::State& state) {
  const client::ReportBuilder builder =
      client::ReportBuilder::Create(client::ReportParametersFromRound(MainJobRound())).value();
  auto rng = DeterministicRandom::FromSeed(1);
  const crypto::Ed25519SigningKey key = crypto::Ed25519SigningKey::Generate(rng.get()).value();
  const std::vector<std::vector<float>> updates = Updates();
  uint64_t bytes = 0;
  for (auto _ : state) {
    auto reports =
        EncodeReports(builder, "bench", 1, updates, &key, absl::Now() + absl::Minutes(30),
                      /*crypto_seed=*/0, static_cast<int>(state.range(0)));
    if (!reports.ok()) {
      state.SkipWithError(reports.status().ToString().c_str());
      return;
    }
    bytes = 0;
    for (const EncodedReport& r : *reports) {
      bytes += r.leader.ByteSizeLong() + r.helper.ByteSizeLong();
    }
  }
  state.SetItemsProcessed(state.iterations() * kClients);
  state.counters["bytes_per_report"] = static_cast<double>(bytes) / kClients;
}
BENCHMARK(BM_EncodeRound)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ServerRound(benchmark::State& state) {
  const proto::RoundParameters params = MainJobRound();
  const client::ReportBuilder builder =
      client::ReportBuilder::Create(client::ReportParametersFromRound(params)).value();
  auto rng = DeterministicRandom::FromSeed(1);
  const crypto::Ed25519SigningKey ticket_key =
      crypto::Ed25519SigningKey::Generate(rng.get()).value();
  const auto ticket_public =
      crypto::Ed25519VerifyingKey::FromRaw(ticket_key.PublicKeyRaw()).value();
  const crypto::Ed25519VerifyingKey* const keys[] = {&ticket_public};
  const std::vector<EncodedReport> reports =
      EncodeReports(builder, "bench", 1, Updates(), &ticket_key, absl::Now() + absl::Minutes(30),
                    /*crypto_seed=*/0, /*max_threads=*/1)
          .value();
  std::shared_ptr<const aggregator::RoundCodec> codecs[2];
  for (int party = 0; party < 2; ++party) {
    aggregator::AggregatorOptions options;
    options.role = party == 0 ? aggregator::Role::kLeader : aggregator::Role::kHelper;
    codecs[party] = aggregator::CodecForRound(params, options).value();
  }
  const dp::Rational sigma2 = dp::VarianceFromDouble(params.noise_variance()).value();
  const std::string query_seed(32, 'q');
  std::vector<std::string> ids;
  for (const EncodedReport& r : reports) ids.push_back(r.leader.report_id());
  // The shares as the upload service hands them over: parsed by gRPC onto
  // the request's arena, which the share cache then keeps (no copy on the
  // server's side), so they are made once here.
  std::vector<aggregator::ParsedShare> parsed[2];
  std::vector<const aggregator::ParsedShare*> shares[2];
  for (int party = 0; party < 2; ++party) {
    parsed[party].reserve(reports.size());
    for (const EncodedReport& r : reports) {
      codecs[party]->CopyInto(party == 0 ? r.leader : r.helper, &parsed[party].emplace_back());
    }
    for (const aggregator::ParsedShare& p : parsed[party]) shares[party].push_back(&p);
  }
  const auto fail = [&](const absl::Status& s) { state.SkipWithError(s.ToString().c_str()); };
  for (auto _ : state) {
    aggregator::ReportChecks checks[2];
    for (int party = 0; party < 2; ++party) {
      const aggregator::RoundCodec& codec = *codecs[party];
      for (size_t i = 0; i < reports.size(); ++i) {
        const EncodedReport& r = reports[i];
        const proto::UploadRequest& request = party == 0 ? r.leader : r.helper;
        absl::StatusOr<proto::UploadTicket> ticket =
            crypto::VerifyUploadTicketWithAnyOf(keys, request.ticket());
        if (!ticket.ok()) return fail(ticket.status());
        if (absl::Status s =
                crypto::CheckTicketFor(*ticket, request.task_id(), request.round_id(),
                                       request.report_id(), absl::ToUnixMillis(absl::Now()), 0);
            !s.ok()) {
          return fail(s);
        }
        const std::string ticket_digest = crypto::TicketDigest(request.ticket());
        if (absl::Status s = codec.ValidateUpload(request); !s.ok()) return fail(s);
        const std::string blob = codec.EncodeStored(request, ticket_digest);
        std::optional<crypto::ProofDigest> public_digest;
        absl::StatusOr<std::string> digest =
            codec.StoredDigest(request, ticket_digest, blob, &public_digest);
        if (!digest.ok()) return fail(digest.status());
        if (absl::Status s = crypto::VerifyUploadSignature(
                *ticket, party == 0 ? crypto::UploadRole::kLeader : crypto::UploadRole::kHelper,
                ticket_digest, *digest, request.device_signature());
            !s.ok()) {
          return fail(s);
        }
        aggregator::ParsedShare& share = parsed[party][i];
        share.ticket_digest = ticket_digest;
        share.public_digest = public_digest;
        benchmark::DoNotOptimize(blob.data());
      }
      std::vector<uint64_t> accumulator(codec.dimension(), 0);
      absl::StatusOr<aggregator::ReportChecks> evaluated =
          codec.Evaluate(shares[party], ids, query_seed, absl::MakeSpan(accumulator));
      if (!evaluated.ok()) return fail(evaluated.status());
      checks[party] = *std::move(evaluated);
      if (absl::Status s = dp::AddDiscreteGaussianNoise(sigma2, absl::MakeSpan(accumulator),
                                                        OpenSslRandom::Default());
          !s.ok()) {
        return fail(s);
      }
      benchmark::DoNotOptimize(accumulator.data());
    }
    for (size_t i = 0; i < reports.size(); ++i) {
      if (checks[0].digests[i] != checks[1].digests[i] ||
          !codecs[0]->Decide(checks[0].verifiers[i], checks[1].verifiers[i])) {
        return fail(absl::InternalError("an honest report was rejected"));
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * kClients);
}
BENCHMARK(BM_ServerRound)->Unit(benchmark::kMillisecond);

void BM_ClearMean(benchmark::State& state) {
  const std::vector<std::vector<float>> updates = Updates();
  for (auto _ : state) {
    std::vector<float> mean(kDim, 0.f);
    for (const auto& u : updates) {
      for (size_t i = 0; i < kDim; ++i) mean[i] += u[i] / kClients;
    }
    benchmark::DoNotOptimize(mean.data());
  }
  state.SetItemsProcessed(state.iterations() * kClients);
}
BENCHMARK(BM_ClearMean)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::sim
