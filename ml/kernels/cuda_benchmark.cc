// GPU benchmarks (DuSA grouped attention, Spotlight Hamming scoring) next to
// their CPU references. Each CUDA call includes host<->device copies (the
// API takes host buffers), so the figures are end-to-end, not kernel-only.
// Skips with an error line when no CUDA device is present.
#include "benchmark/benchmark.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using testing::RandomTensor;

void BM_DusaCuda(benchmark::State& state) {
  if (!CudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t h = 16, n = state.range(0), d = 64, b = state.range(1);
  const Tensor q = RandomTensor({1, h, n, d}, 1), k = RandomTensor({1, h, n, d}, 2),
               v = RandomTensor({1, h, n, d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(DusaForward(q, k, v, b, Backend::kCuda));
  state.counters["GFLOPs"] =
      benchmark::Counter(DusaFlops(h, n, d, b) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["host_bytes"] = 4.0 * h * n * d * sizeof(float);
}
BENCHMARK(BM_DusaCuda)->Args({4096, 64})->Args({16384, 128})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HammingCuda(benchmark::State& state) {
  if (!CudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  const PackedCodes q = *PackSignBits(RandomTensor({4, 128}, 1));
  const PackedCodes k = *PackSignBits(RandomTensor({n, 128}, 2));
  for (auto _ : state) benchmark::DoNotOptimize(HammingScores(q, k, Backend::kCuda));
  state.counters["GBps"] =
      benchmark::Counter(16.0 * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HammingCuda)->Arg(512 * 1024)->Arg(8 * 1024 * 1024)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::kernels
