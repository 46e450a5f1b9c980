// Discrete Gaussian sampler throughput and accountant cost.
//   build-dp/crypto/dp/crypto_dp_benchmark
// The per-round noise for a D = 2^20 aggregate share is BM_NoiseShare/1048576.
#include <cstdint>
#include <vector>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/dp/accountant.h"
#include "crypto/dp/calibration.h"
#include "crypto/dp/discrete_gaussian.h"

namespace tandem::dp {
namespace {

// Samples/s at sigma^2 = 2^arg (integer variance).
void BM_SampleDiscreteGaussian(benchmark::State& state) {
  auto rng = DeterministicRandom::FromSeed(1);
  auto sampler = DiscreteGaussianSampler::Create({uint64_t{1} << state.range(0), 1}, rng.get());
  if (!sampler.ok()) {
    state.SkipWithError("create failed");
    return;
  }
  std::vector<int64_t> out(4096);
  for (auto _ : state) {
    if (!(*sampler)->SampleInto(absl::MakeSpan(out)).ok()) state.SkipWithError("sample failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}
BENCHMARK(BM_SampleDiscreteGaussian)->Arg(0)->Arg(10)->Arg(20)->Arg(40)->Arg(60);

// Non-integer variance (sigma^2 = 1e6 / 3): exercises the wide rationals.
void BM_SampleDiscreteGaussianRational(benchmark::State& state) {
  auto rng = DeterministicRandom::FromSeed(1);
  auto sampler = DiscreteGaussianSampler::Create({1000000, 3}, rng.get());
  std::vector<int64_t> out(4096);
  for (auto _ : state) {
    if (!(*sampler)->SampleInto(absl::MakeSpan(out)).ok()) state.SkipWithError("sample failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}
BENCHMARK(BM_SampleDiscreteGaussianRational);

// Noising a whole aggregate share of `arg` words with OpenSSL randomness (the
// production path), sigma^2 = 2^32.
void BM_NoiseShare(benchmark::State& state) {
  std::vector<uint64_t> share(static_cast<size_t>(state.range(0)), 7);
  for (auto _ : state) {
    if (!AddDiscreteGaussianNoise({uint64_t{1} << 32, 1}, absl::MakeSpan(share),
                                  OpenSslRandom::Default()).ok()) {
      state.SkipWithError("noise failed");
    }
    benchmark::DoNotOptimize(share.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_NoiseShare)->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// One accountant charge (72 orders, 10 of them fractional).
void BM_AccountantCharge(benchmark::State& state) {
  AccountantOptions o;
  o.epsilon_budget = 1e9;
  auto acc = PrivacyAccountant::Create(o);
  for (auto _ : state) {
    if (!acc->Charge(0.01, 1.1).ok()) state.SkipWithError("charge failed");
  }
}
BENCHMARK(BM_AccountantCharge)->Unit(benchmark::kMicrosecond);

// The noise a task's target epsilon sets (what a coordinator computes once
// per task): the main job's plan, 20 rounds at q = 0.05 with blocks per
// group = arg (1: no block sampling), epsilon 2.55.
void BM_MinNoiseMultiplier(benchmark::State& state) {
  const std::vector<PlannedReleases> plan = {
      {.q = 0.05, .steps = 20, .blocks_per_group = state.range(0)}};
  const std::vector<double> orders = DefaultOrders();
  for (auto _ : state) {
    absl::StatusOr<double> z =
        MinNoiseMultiplier(plan, 2.55, 1e-5, orders, EpsilonConversion::kImproved);
    if (!z.ok()) state.SkipWithError("calibration failed");
    benchmark::DoNotOptimize(z);
  }
}
BENCHMARK(BM_MinNoiseMultiplier)->Arg(1)->Arg(2)->Arg(8)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::dp
