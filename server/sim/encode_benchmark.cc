// A round's private encoding as tandem-sim does it (EncodeReports: clip,
// fixed point, PREAMBLE key shares, norm proofs, ticket and device
// signatures) at the main job's DP settings: the MLP 784-32-10 (D = 25,450),
// B = 256, one of 2 blocks per group (k = 50, 12,800 values sent), norm
// proofs on, 100 clients a round (q = 0.05 of 2,000). Arg: threads. The
// clear FedAvg baseline of the same round is BM_ClearMean (what the
// simulator does for it: the float mean of the updates).
#include <cmath>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
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

void BM_EncodeRound(benchmark::State& state) {
  server::SecureSumConfig c;
  c.task_id = "bench";
  c.model_dimension = kDim;
  c.block_size = 256;
  c.log_blocks_per_group = 1;
  c.norm_proofs = true;
  const server::SecureSum sum = server::SecureSum::Create(c).value();
  const client::ReportBuilder builder =
      client::ReportBuilder::Create(client::ReportParametersFromRound(sum.RoundParameters(1)))
          .value();
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
