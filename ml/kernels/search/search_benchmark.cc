// Benchmarks of the search family (bench/search.md). Each reports its rate
// next to this machine's roof, measured once at startup:
//   bw_roof:   STREAM-triad bandwidth (3 x 64 MiB float arrays, oneTBB),
//   flop_roof: fp32 FMA throughput (16 independent AVX-512 accumulators per
//              thread, all hardware threads).
// The scan is reported against both roofs (its intensity, 6 N FLOPs per
// 8 + 8 N / (H P) bytes, is a few FLOP/byte, so it is bandwidth- or
// latency-bound); TrajMamba encode and Frank-Wolfe against the FLOP roof;
// PartPacker's contact pass against the bandwidth roof (label reads).
// Rates use wall time (UseRealTime). "Small" variants run in the ctest smoke pass.
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/kernels/search/frappe.h"
#include "ml/kernels/search/part_packer.h"
#include "ml/kernels/search/ssm_scan.h"
#include "ml/kernels/search/trajmamba.h"
#include "ml/kernels/testing/machine_roofs.h"
#include "ml/kernels/testing/random_tensor.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml::kernels::search {
namespace {

using testing::RandomTensor;

using testing::MachineRoofs;
using testing::ReportBytes;
using testing::ReportFlops;

// Args: batch, L, H, P, N, chunk (0 = naive recurrence).
void BM_SelectiveScan(benchmark::State& state) {
  const ScanDims s{state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
  const Tensor x = RandomTensor({s.batch, s.length, s.heads, s.head_dim}, 1),
               dt = RandomTensor({s.batch, s.length, s.heads}, 2, 0.5f),
               b = RandomTensor({s.batch, s.length, s.state_dim}, 3),
               c = RandomTensor({s.batch, s.length, s.state_dim}, 4),
               d = RandomTensor({s.heads}, 5), bias = RandomTensor({s.heads}, 6, 0.1f);
  Tensor a = *Tensor::Zeros({s.heads});
  for (int64_t i = 0; i < s.heads; ++i) a.mutable_data()[i] = -1.0f - i;
  const ScanOptions o{.chunk = state.range(5)};
  for (auto _ : state) benchmark::DoNotOptimize(SelectiveScan(x, dt, a, b, c, d, bias, o));
  ReportFlops(state, SelectiveScanFlops(s));
  ReportBytes(state, SelectiveScanBytes(s));
}
BENCHMARK(BM_SelectiveScan)->Name("BM_SelectiveScan_Small")->Args({1, 64, 2, 8, 8, 16})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SelectiveScan)
    ->Args({8, 1024, 4, 64, 128, 0})->Args({8, 1024, 4, 64, 128, 64})
    ->Args({8, 1024, 4, 64, 128, 256})->Args({32, 256, 8, 16, 16, 0})
    ->Args({32, 256, 8, 16, 16, 64})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

TrajBatch WalkBatch(int64_t batch, int64_t len, int64_t vocab) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> n(0, 1);
  TrajBatch t{*Tensor::Zeros({batch, len, 2}), *Tensor::Zeros({batch, len}),
              *Tensor::Zeros({batch, len}), std::vector<int64_t>(batch, len)};
  for (int64_t i = 0; i < batch * len; ++i) {
    t.gps.mutable_data()[2 * i] = static_cast<float>(104.06 + 0.002 * (i % len) + 0.0001 * n(gen));
    t.gps.mutable_data()[2 * i + 1] = static_cast<float>(30.67 + 0.0001 * n(gen));
    t.times.mutable_data()[i] = static_cast<float>(15 * (i % len));
    t.roads.mutable_data()[i] = static_cast<float>(gen() % vocab);
  }
  return t;
}

// Args: batch, L, d_model, d_state, layers.
void BM_TrajMambaEncode(benchmark::State& state) {
  TrajMambaConfig c;
  c.d_model = state.range(2);
  c.d_state = state.range(3);
  c.layers = state.range(4);
  c.head_dim = 16;
  c.road_vocab = 1000;
  const TrajMambaWeights w = *TrajMambaWeights::Random(c, 1);
  const TrajBatch b = WalkBatch(state.range(0), state.range(1), c.road_vocab);
  for (auto _ : state) benchmark::DoNotOptimize(TrajMambaEncode(w, b));
  ReportFlops(state, TrajMambaFlops(c, state.range(0) * state.range(1)));
}
BENCHMARK(BM_TrajMambaEncode)->Name("BM_TrajMambaEncode_Small")->Args({2, 32, 16, 8, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TrajMambaEncode)->Args({64, 128, 64, 16, 2})->Args({16, 512, 128, 64, 4})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: K, L. One Frank-Wolfe step evaluates every piece (~8 FLOPs each).
void BM_FrankWolfeStep(benchmark::State& state) {
  const int64_t k = state.range(0), l = state.range(1);
  std::mt19937_64 gen(4);
  std::normal_distribution<double> n(0, 1);
  std::vector<double> m(k * l);
  for (double& v : m) v = n(gen);
  const PreferenceCone cone = *PreferenceCone::Orthant(l);
  const FrappeObjective f = *FrappeObjective::Create(m, k, cone, 1.0);
  constexpr int64_t kSteps = 1000;
  for (auto _ : state) benchmark::DoNotOptimize(FrankWolfe(f, kSteps));
  state.counters["pieces"] = static_cast<double>(f.pieces().size());
  state.counters["ns_per_step"] = benchmark::Counter(
      kSteps * state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  ReportFlops(state, 8.0 * static_cast<double>(f.pieces().size()) * kSteps);
}
BENCHMARK(BM_FrankWolfeStep)->Name("BM_FrankWolfeStep_Small")->Args({4, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_FrankWolfeStep)->Args({20, 3})->Args({100, 4})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Args: grid side, parts. Voronoi parts of a ball; full pack (contact graph,
// contraction, colouring, volumes).
void BM_PartPacker(benchmark::State& state) {
  const int64_t side = state.range(0), parts = state.range(1);
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> u(0.1 * side, 0.9 * side);
  std::vector<double> seeds(3 * parts);
  for (double& v : seeds) v = u(gen);
  VoxelParts v{side, side, side, parts, std::vector<int32_t>(side * side * side, -1)};
  const double c = (side - 1) / 2.0;
  for (int64_t x = 0; x < side; ++x)
    for (int64_t y = 0; y < side; ++y)
      for (int64_t z = 0; z < side; ++z) {
        if (std::hypot(x - c, y - c, z - c) > 0.45 * side) continue;
        int64_t best = 0;
        double bd = 1e300;
        for (int64_t p = 0; p < parts; ++p) {
          const double d = std::hypot(x - seeds[3 * p], y - seeds[3 * p + 1], z - seeds[3 * p + 2]);
          if (d < bd) bd = d, best = p;
        }
        v.labels[(x * side + y) * side + z] = static_cast<int32_t>(best);
      }
  int64_t contractions = 0;
  for (auto _ : state) {
    auto p = PackDualVolumes(v, 1);
    contractions = p.ok() ? p->contractions : -1;
    benchmark::DoNotOptimize(p);
  }
  state.counters["contractions"] = static_cast<double>(contractions);
  // Label reads of the 27-neighbourhood pass (the dominant cost).
  ReportBytes(state, 27.0 * 4 * side * side * side);
}
BENCHMARK(BM_PartPacker)->Name("BM_PartPacker_Small")->Args({16, 8})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PartPacker)->Args({64, 32})->Args({128, 64})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::kernels::search
