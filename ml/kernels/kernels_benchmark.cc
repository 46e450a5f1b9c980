// CPU kernel benchmarks. Each reports achieved GFLOP/s or GB/s and the
// fraction of this machine's roof, measured once at startup:
//   bw_roof:   STREAM-triad bandwidth (3 x 64 MiB float arrays, oneTBB),
//   flop_roof: fp32 FMA throughput (16 independent vector accumulators per
//              thread, all hardware threads).
// Compute-bound kernels (dense/DuSA attention, hash MLP, REN) report
// frac_flop_roof; bandwidth-bound ones (decode over a compacted cache,
// Hamming retrieval, CAT FFT, SnapKV scoring) report frac_bw_roof.
// Rates use wall time (UseRealTime), since the kernels are multi-threaded.
// "Small" variants run in the ctest smoke pass; the others are the figures
// in bench/kernels.md.
#include <chrono>
#include <cmath>
#include <complex>
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/cat.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/fft.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/kernels/testing/machine_roofs.h"
#include "ml/kernels/testing/random_tensor.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml::kernels {
namespace {

using testing::RandomTensor;

using testing::MachineRoofs;
using testing::ReportBytes;
using testing::ReportFlops;

// Fractions are computed in bench/kernels.md from GFLOPs / flop_roof_GFLOPs
// (Google Benchmark rates are only final after the loop).

void BM_DenseAttention(benchmark::State& state) {
  const int64_t h = 8, n = state.range(0), d = 64;
  const Tensor q = RandomTensor({h, n, d}, 1), k = RandomTensor({h, n, d}, 2),
               v = RandomTensor({h, n, d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(DenseAttention(q, k, v, false));
  ReportFlops(state, 4.0 * h * n * n * d);
}
BENCHMARK(BM_DenseAttention)->Name("BM_DenseAttention_Small")->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DenseAttention)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DusaForward(benchmark::State& state) {
  const int64_t h = 8, n = state.range(0), d = 64, b = state.range(1);
  const Tensor q = RandomTensor({1, h, n, d}, 1), k = RandomTensor({1, h, n, d}, 2),
               v = RandomTensor({1, h, n, d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(DusaForward(q, k, v, b));
  ReportFlops(state, DusaFlops(h, n, d, b));
}
BENCHMARK(BM_DusaForward)->Name("BM_DusaForward_Small")->Args({64, 8})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DusaForward)->Args({4096, 64})->Args({16384, 128})->Unit(benchmark::kMillisecond)->UseRealTime();

// One complex FFT of length n, forward then inverse (two transforms per
// iteration, so the data stays bounded), single thread: FFTW (impl 0) against
// our reference radix-2/Bluestein (impl 1). FLOPs by the 5 n log2 n convention.
void BM_Fft(benchmark::State& state) {
  const int64_t n = state.range(0);
  const FftImpl impl = state.range(1) ? FftImpl::kReference : FftImpl::kFftw;
  auto fft = Fft::Create(n, impl);
  if (!fft.ok()) {
    state.SkipWithError(fft.status().ToString().c_str());
    return;
  }
  const Tensor t = RandomTensor({2 * n}, 1);
  std::vector<std::complex<float>> buf(n);
  for (int64_t k = 0; k < n; ++k) buf[k] = {t.data()[2 * k], t.data()[2 * k + 1]};
  for (auto _ : state) {
    (*fft)->Forward(buf.data());
    (*fft)->Inverse(buf.data());
    benchmark::DoNotOptimize(buf.data());
  }
  ReportFlops(state, 2 * 5.0 * n * std::log2(double(n)));
}
BENCHMARK(BM_Fft)->Name("BM_Fft_Small")->Args({64, 0})->Args({60, 1});
BENCHMARK(BM_Fft)->ArgsProduct({{4096, 4000, 1000, 65536}, {0, 1}})->Unit(benchmark::kMicrosecond);

void BM_CatMix(benchmark::State& state) {
  const int64_t h = 8, n = state.range(0), d = 512;
  const CatMethod method = state.range(1) ? CatMethod::kGather : CatMethod::kFft;
  const Tensor z = RandomTensor({1, h, n}, 1), v = RandomTensor({1, n, d}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(CatMix(z, v, method));
  ReportBytes(state, (2.0 * n * d + h * n) * sizeof(float));
  // FFT work: 3 complex transforms per (head, channel pair) + 1 per head.
  const double transforms = h * (d / h / 2.0) * 2.0 + h;
  ReportFlops(state, method == CatMethod::kFft ? transforms * 5.0 * n * std::log2(double(n))
                                               : 2.0 * n * n * d);
}
BENCHMARK(BM_CatMix)->Name("BM_CatMix_Small")->Args({64, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CatMix)->Args({4096, 0})->Args({4096, 1})->Args({4000, 0})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SnapKvScores(benchmark::State& state) {
  const int64_t h = 32, hkv = 8, n = state.range(0), d = 128;
  const Tensor q = RandomTensor({h, n, d}, 1), k = RandomTensor({hkv, n, d}, 2);
  SnapKvOptions o;
  for (auto _ : state) benchmark::DoNotOptimize(SnapKvScores(q, k, o));
  ReportBytes(state, double(hkv) * n * d * sizeof(float));  // K read once (minimum traffic)
  ReportFlops(state, 2.0 * h * o.window * n * d);
}
BENCHMARK(BM_SnapKvScores)->Name("BM_SnapKvScores_Small")->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SnapKvScores)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AdaKvCompress(benchmark::State& state) {
  const int64_t h = 32, hkv = 8, n = state.range(0), d = 128;
  const Tensor q = RandomTensor({h, n, d}, 1), k = RandomTensor({hkv, n, d}, 2),
               v = RandomTensor({hkv, n, d}, 3);
  AdaKvOptions o;
  o.budget = 1024;
  for (auto _ : state) benchmark::DoNotOptimize(AdaKvCompress(q, k, v, o));
  ReportBytes(state, 2.0 * hkv * n * d * sizeof(float));
}
BENCHMARK(BM_AdaKvCompress)->Name("BM_AdaKvCompress_Small")->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdaKvCompress)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CompactDecode(benchmark::State& state) {
  const int64_t h = 32, hkv = 8, n = state.range(0), d = 128;
  const Tensor q = RandomTensor({h, n, d}, 1), k = RandomTensor({hkv, n, d}, 2),
               v = RandomTensor({hkv, n, d}, 3);
  AdaKvOptions o;
  o.budget = state.range(1);
  const CompactKv cache = *AdaKvCompress(q, k, v, o);
  const Tensor qd = RandomTensor({h, d}, 4);
  for (auto _ : state) benchmark::DoNotOptimize(CompactDecodeAttention(qd, cache));
  ReportBytes(state, 2.0 * cache.keys.size() * sizeof(float));
}
BENCHMARK(BM_CompactDecode)->Name("BM_CompactDecode_Small")->Args({256, 64})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CompactDecode)->Args({32768, 32768})->Args({32768, 1024})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_HammingTopK(benchmark::State& state) {
  const int64_t n = state.range(0), g = 4;
  const PackedCodes q = *PackSignBits(RandomTensor({g, 128}, 1));
  const PackedCodes k = *PackSignBits(RandomTensor({n, 128}, 2));
  const int64_t top = SpotlightDefaultTopK(n);
  for (auto _ : state) benchmark::DoNotOptimize(HammingTopK(q, k, top));
  ReportBytes(state, double(n) * 16);
}
BENCHMARK(BM_HammingTopK)->Name("BM_HammingTopK_Small")->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HammingTopK)->Arg(512 * 1024)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The scoring pass alone (HammingScores), as the worker's spotlight.topk
// runs it once per query.
void BM_HammingScores(benchmark::State& state) {
  const int64_t n = state.range(0), g = 4;
  const PackedCodes q = *PackSignBits(RandomTensor({g, 128}, 1));
  const PackedCodes k = *PackSignBits(RandomTensor({n, 128}, 2));
  for (auto _ : state) benchmark::DoNotOptimize(HammingScores(q, k));
  ReportBytes(state, double(n) * 16);
}
BENCHMARK(BM_HammingScores)->Arg(512 * 1024)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SpotlightHash(benchmark::State& state) {
  const int64_t n = state.range(0), d = 128;
  const auto w = *SpotlightHashWeights::Random(d, 1);
  const Tensor x = RandomTensor({n, d}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(SpotlightHash(x, w));
  ReportFlops(state, 4.0 * n * d * d);
}
BENCHMARK(BM_SpotlightHash)->Name("BM_SpotlightHash_Small")->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SpotlightHash)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SpotlightLoss(benchmark::State& state) {
  const int64_t nq = state.range(0), nk = state.range(1), d = 128;
  const auto w = *SpotlightHashWeights::Random(d, 1);
  const Tensor q = RandomTensor({nq, d}, 2), k = RandomTensor({nk, d}, 3);
  SpotlightLossOptions o;
  for (auto _ : state) benchmark::DoNotOptimize(SpotlightRankingLoss(q, k, w, o));
}
BENCHMARK(BM_SpotlightLoss)->Name("BM_SpotlightLoss_Small")->Args({8, 128})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SpotlightLoss)->Args({64, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RenBlock(benchmark::State& state) {
  const int64_t np = state.range(0), nk = state.range(1), d = state.range(2);
  const auto w = *RenWeights::Random(d, 8, 1, 1);
  const Tensor q = RandomTensor({np, d}, 2), kv = RandomTensor({nk, d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(RenBlock(q, kv, w.layers[0], 8, false));
  ReportFlops(state, RenBlockFlops(np, nk, d));
}
BENCHMARK(BM_RenBlock)->Name("BM_RenBlock_Small")->Args({16, 49, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RenBlock)->Args({256, 1369, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::kernels
