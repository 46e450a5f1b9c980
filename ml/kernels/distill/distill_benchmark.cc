// Benchmarks of the distillation-objective kernels. Each reports its
// minimum memory traffic (GBps) or FLOP rate (GFLOPs) and the fraction of
// this machine's roof, measured once at startup:
//   bw_roof:   STREAM triad a = b + 3 c over 3 x 64 MiB float arrays (oneTBB),
//   flop_roof: fp64 FMA throughput, 16 x 8 independent accumulators per
//              thread on every hardware thread (HDD computes in float64).
// The loss kernels are streaming passes (O(1) flops per byte read), so they
// are judged against bandwidth; the embedded HDD step is a GEMM, judged
// against the fp64 FLOP roof. Rates use wall time (UseRealTime).
// "Small" variants run in the ctest smoke pass; the others are the figures
// in bench/distill.md.
#include <algorithm>
#include <chrono>
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/kernels/distill/gld.h"
#include "ml/kernels/distill/hdd.h"
#include "ml/kernels/distill/sdpgo.h"
#include "ml/kernels/distill/sled.h"
#include "ml/kernels/testing/machine_roofs.h"
#include "ml/kernels/testing/random_tensor.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml::kernels::distill {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;

using ::tandem::ml::kernels::testing::MachineRoofs;

void ReportBytes(benchmark::State& state, double bytes) {
  testing::ReportBytes(state, bytes);
  state.counters["frac_bw_roof"] = benchmark::Counter(
      bytes * static_cast<double>(state.iterations()) / 1e9 / MachineRoofs().bw_gbps,
      benchmark::Counter::kIsRate);
}

void ReportFlops(benchmark::State& state, double flops) {
  testing::ReportFlops(state, flops, /*fp64=*/true);
  state.counters["frac_flop_roof"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9 / MachineRoofs().fp64_gflops,
      benchmark::Counter::kIsRate);
}

void BM_HddLoss(benchmark::State& state) {
  const int64_t nr = state.range(0), ns = state.range(1), d = state.range(2);
  const Tensor real = RandomTensor({nr, d}, 1), syn = RandomTensor({ns, d}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(HddCentroidLoss(real, syn, {}));
  ReportBytes(state, (nr + 2.0 * ns) * d * sizeof(float));
}
BENCHMARK(BM_HddLoss)->Name("BM_HddLoss_Small")->Args({32, 4, 64})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HddLoss)->Args({256, 50, 2048})->Unit(benchmark::kMicrosecond)->UseRealTime();

// HDD step with a random linear embedding: C classes, float64 GEMMs
// (embed real and synthetic, back-project the gradient).
void BM_HddDistillStep(benchmark::State& state) {
  const int64_t c = 10, nr = state.range(0), ns = state.range(1), din = state.range(2), e = state.range(3);
  const Tensor real = RandomTensor({c, nr, din}, 1), syn = RandomTensor({c, ns, din}, 2);
  const Tensor vel = *Tensor::Zeros({c, ns, din});
  HddDistillOptions o;
  o.embed_dim = e;
  o.embed_seed = 3;
  for (auto _ : state) benchmark::DoNotOptimize(HddDistillStep(real, syn, vel, o));
  ReportFlops(state, 2.0 * c * (nr + 2.0 * ns) * din * e);
}
BENCHMARK(BM_HddDistillStep)->Name("BM_HddDistillStep_Small")->Args({16, 2, 32, 16})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HddDistillStep)->Args({256, 10, 1024, 512})->Unit(benchmark::kMillisecond)->UseRealTime();

// GLD: read teacher and student logits, write d student (float32).
void BM_GldLoss(benchmark::State& state) {
  const int64_t t = state.range(0), v = state.range(1), k = state.range(2);
  const Tensor zt = RandomTensor({t, v}, 1, 2.0f), zs = RandomTensor({t, v}, 2, 2.0f);
  for (auto _ : state) benchmark::DoNotOptimize(GldLoss(zt, zs, {.top_k = k}));
  ReportBytes(state, 3.0 * t * v * sizeof(float));
}
BENCHMARK(BM_GldLoss)->Name("BM_GldLoss_Small")->Args({16, 256, 4})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GldLoss)->Args({512, 32000, 8})->Unit(benchmark::kMillisecond)->UseRealTime();

// SDPGO: read z, q_hist (B, C) and f, G, f_prev (B, F); write d z, q_next,
// d f and the weights.
void BM_SdpgoLoss(benchmark::State& state) {
  const int64_t b = state.range(0), c = state.range(1), f = state.range(2);
  const Tensor z = RandomTensor({b, c}, 1), feats = RandomTensor({b, f}, 2);
  const Tensor g = RandomTensor({b, f}, 3), fp = RandomTensor({b, f}, 4);
  Tensor q = *Tensor::Zeros({b, c});
  for (float& x : q.mutable_data()) x = 1.0f / static_cast<float>(c);
  std::vector<int64_t> y(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) y[i] = i % c;
  for (auto _ : state) benchmark::DoNotOptimize(SdpgoLoss(z, y, feats, g, fp, q, {.lambda = 0.5}));
  ReportBytes(state, (4.0 * b * c + 5.0 * b * f) * sizeof(float));
}
BENCHMARK(BM_SdpgoLoss)->Name("BM_SdpgoLoss_Small")->Args({8, 10, 64})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SdpgoLoss)->Args({256, 1000, 8192})->Unit(benchmark::kMillisecond)->UseRealTime();

// SLED: read samples (T, m, D), target (T, D), mask; write d samples.
void BM_EnergyLoss(benchmark::State& state) {
  const int64_t t = state.range(0), m = state.range(1), d = state.range(2);
  const Tensor s = RandomTensor({t, m, d}, 1), y = RandomTensor({t, d}, 2);
  Tensor mask = *Tensor::Zeros({t});
  for (float& x : mask.mutable_data()) x = 1.0f;
  for (auto _ : state) benchmark::DoNotOptimize(EnergyDistanceLoss(s, y, mask, {}));
  ReportBytes(state, (2.0 * t * m * d + t * d + t) * sizeof(float));
}
BENCHMARK(BM_EnergyLoss)->Name("BM_EnergyLoss_Small")->Args({16, 2, 8})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_EnergyLoss)->Args({8192, 2, 128})->Args({8192, 8, 128})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::kernels::distill
