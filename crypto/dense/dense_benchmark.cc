// Dense two-server sharing (crypto/dense/dense_sharing.h), one thread:
//   BM_DenseShare/<log D>         client: helper pad G(s), leader x - G(s) packed
//   BM_DenseAccumulateLeader/<log D>  server: unpack the leader's values, add
//   BM_DenseAccumulateHelper/<log D>  server: expand the helper's seed, add
// Limits: the pad costs one fixed-key AES hash per 16 bytes (BM_AesMmo in
// crypto_dpf_benchmark); the leader's pass moves 8 D bytes in and 8 D bytes
// of accumulator through memory.
#include <vector>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/dense/dense_sharing.h"

namespace tandem::crypto {
namespace {

std::vector<uint64_t> Values(uint64_t d) {
  std::vector<uint64_t> v(d);
  for (uint64_t i = 0; i < d; ++i) v[i] = i * 0x9E3779B97F4A7C15ull;
  return v;
}

void BM_DenseShare(benchmark::State& state) {
  const uint64_t d = uint64_t{1} << state.range(0);
  auto sharing = DenseSharing::Create(d, 64).value();
  const std::vector<uint64_t> x = Values(d);
  auto rng = DeterministicRandom::FromSeed(1);
  for (auto _ : state) {
    auto shares = sharing.Share(x, rng.get());
    benchmark::DoNotOptimize(shares);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(8 * d));
}
BENCHMARK(BM_DenseShare)->Arg(15)->Arg(17)->Arg(20);

void Accumulate(benchmark::State& state, bool leader) {
  const uint64_t d = uint64_t{1} << state.range(0);
  auto sharing = DenseSharing::Create(d, 64).value();
  auto rng = DeterministicRandom::FromSeed(2);
  auto shares = sharing.Share(Values(d), rng.get()).value();
  const proto::DenseShare& share = leader ? shares.first : shares.second;
  std::vector<uint64_t> acc(d, 0);
  for (auto _ : state) {
    if (!sharing.Accumulate(share, absl::MakeSpan(acc)).ok()) {
      state.SkipWithError("accumulate failed");
      return;
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(8 * d));
}
void BM_DenseAccumulateLeader(benchmark::State& state) { Accumulate(state, true); }
void BM_DenseAccumulateHelper(benchmark::State& state) { Accumulate(state, false); }
BENCHMARK(BM_DenseAccumulateLeader)->Arg(15)->Arg(17)->Arg(20);
BENCHMARK(BM_DenseAccumulateHelper)->Arg(15)->Arg(17)->Arg(20);

}  // namespace
}  // namespace tandem::crypto
