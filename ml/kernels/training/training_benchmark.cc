// Benchmarks of the training kernels. Each reports its rate next to this
// machine's roof, measured once at start-up (same method as
// ml/kernels/kernels_benchmark.cc): bw_roof = STREAM triad over 3 x 64 MiB
// (oneTBB), flop_roof = fp32 FMA loop with 16 independent AVX-512
// accumulators per hardware thread.
//   PLRF step (B = 1): a matrix-vector pass over W, bandwidth-bound ->
//     GB/s of W read (and GFLOP/s);
//   CrossSpectra forward/adjoint: the layer combination streams L R C
//     floats -> GB/s of Delta W written/read (and GFLOP/s by Flops());
//   reweighted gradient: streams K x n mask bytes + scores -> GB/s;
//   projection: sort-bound, reported as GB/s of scores;
//   layer-reconstruction loss (one sub-model forward): GEMM -> GFLOP/s.
// Rates use wall time (UseRealTime). "Small" variants run in the ctest
// smoke pass; the others are the figures in bench/training.md.
#include <chrono>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/kernels/testing/machine_roofs.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/kernels/training/cross_spectra.h"
#include "ml/kernels/training/plrf.h"
#include "ml/kernels/training/reweighted_pruning.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml::kernels::training {
namespace {

using kernels::testing::RandomTensor;

using testing::MachineRoofs;

// Sets rate counters from the per-iteration FLOPs and bytes, next to the
// roofs; bench/training.md divides one by the other.
void Report(benchmark::State& state, double flops, double bytes) {
  if (flops > 0) testing::ReportFlops(state, flops);
  if (bytes > 0) testing::ReportBytes(state, bytes);
}

// One PLRF step: sample B x v, gradient (2 matvecs for B = 1), DANA update.
void BM_PlrfStep(benchmark::State& state) {
  const int64_t v = state.range(0), d = state.range(1), batch = state.range(2);
  auto p = *PlrfProblem::Create({.alpha = 1.0, .beta = 0.3, .v = v, .d = d});
  auto opt = *MakePlrfOptimizer(*p, PlrfOptimizer::kDanaDecaying, batch, 0.0);
  std::vector<float> theta(d, 0.0f), grad(d);
  std::mt19937_64 gen(1);
  MachineRoofs();
  for (auto _ : state) {
    benchmark::DoNotOptimize(p->SampleGradient(theta, batch, gen, absl::MakeSpan(grad)));
    benchmark::DoNotOptimize(opt->Step(absl::MakeSpan(theta), grad));
  }
  Report(state, 2.0 * batch * v * d + 4.0 * batch * d, 4.0 * v * d);
}
BENCHMARK(BM_PlrfStep)->Name("BM_PlrfStep_Small")->Args({200, 50, 1})->UseRealTime();
BENCHMARK(BM_PlrfStep)->Args({2000, 500, 1})->Args({2000, 500, 32})->Args({8000, 2000, 1})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

std::unique_ptr<CrossSpectra> MakeCs(int64_t layers, int64_t dim, int64_t k1, int64_t k2) {
  const CrossSpectraShape s{.layers = layers, .projections = 3, .d_out = dim, .d_in = dim,
                            .kappa1 = k1, .kappa2 = k2, .transform = LayerTransform::kDct};
  return *CrossSpectra::Create(s, *SampleSpectralLocations(3 * dim, dim, k1, 1));
}

void BM_CrossSpectraForward(benchmark::State& state) {
  auto cs = MakeCs(state.range(0), state.range(1), state.range(2), state.range(3));
  const Tensor c = RandomTensor({state.range(3), state.range(2)}, 2);
  MachineRoofs();
  for (auto _ : state) benchmark::DoNotOptimize(cs->Forward(c));
  const double out_bytes = 4.0 * state.range(0) * 3 * state.range(1) * state.range(1);
  Report(state, cs->Flops(), out_bytes);
}
BENCHMARK(BM_CrossSpectraForward)->Name("BM_CrossSpectraForward_Small")->Args({4, 16, 32, 2})
    ->UseRealTime();
BENCHMARK(BM_CrossSpectraForward)->Args({12, 256, 1000, 4})->Args({32, 512, 1000, 4})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CrossSpectraAdjoint(benchmark::State& state) {
  auto cs = MakeCs(state.range(0), state.range(1), state.range(2), state.range(3));
  const Tensor g = RandomTensor({state.range(0), 3, state.range(1), state.range(1)}, 3);
  MachineRoofs();
  for (auto _ : state) benchmark::DoNotOptimize(cs->Adjoint(g));
  // The gradient is read once per kept layer frequency.
  const double in_bytes = 4.0 * state.range(3) * g.size();
  Report(state, cs->Flops(), in_bytes);
}
BENCHMARK(BM_CrossSpectraAdjoint)->Name("BM_CrossSpectraAdjoint_Small")->Args({4, 16, 32, 2})
    ->UseRealTime();
BENCHMARK(BM_CrossSpectraAdjoint)->Args({12, 256, 1000, 4})->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ReweightedGradient(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1);
  std::vector<float> s0(n, 0.5f), s(n);
  std::mt19937_64 gen(4);
  std::uniform_real_distribution<float> u(0.3f, 0.7f);
  for (float& x : s) x = u(gen);
  auto loss = [](absl::Span<const uint8_t> m) -> absl::StatusOr<double> {
    return static_cast<double>(m[0]);
  };
  const SubModelSamples smp = *DrawSubModels(s0, k, gen, loss);
  MachineRoofs();
  for (auto _ : state) benchmark::DoNotOptimize(ReweightedScoreGradient(smp, s, {}));
  Report(state, 0, static_cast<double>(k) * n * (1 + 8) + 4.0 * n);
}
BENCHMARK(BM_ReweightedGradient)->Name("BM_ReweightedGradient_Small")->Args({4096, 4})
    ->UseRealTime();
BENCHMARK(BM_ReweightedGradient)->Args({1 << 20, 8})->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ProjectScores(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x(n);
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<float> u(-0.2f, 1.2f);
  for (float& xi : x) xi = u(gen);
  MachineRoofs();
  for (auto _ : state) benchmark::DoNotOptimize(ProjectScores(x, 0.5 * n * 0.5, 1e-3, 1 - 1e-3));
  Report(state, 0, 8.0 * n);
}
BENCHMARK(BM_ProjectScores)->Name("BM_ProjectScores_Small")->Arg(4096)->UseRealTime();
BENCHMARK(BM_ProjectScores)->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LayerReconstructionLoss(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = state.range(1);
  auto layer = *LayerReconstruction::Create(RandomTensor({rows, dim}, 6),
                                            RandomTensor({dim, dim}, 7));
  std::vector<uint8_t> mask(dim * dim);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 2654435761u >> 7) & 1;
  MachineRoofs();
  for (auto _ : state) benchmark::DoNotOptimize(layer->Loss(mask));
  Report(state, layer->LossFlops(), 0);
}
BENCHMARK(BM_LayerReconstructionLoss)->Name("BM_LayerReconstructionLoss_Small")
    ->Args({32, 32})->UseRealTime();
BENCHMARK(BM_LayerReconstructionLoss)->Args({512, 1024})->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::ml::kernels::training
