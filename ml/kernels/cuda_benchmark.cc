// GPU benchmarks (DuSA grouped attention, Spotlight Hamming scoring and
// device top-k, Ada-KV compaction and compacted decode) next to their CPU
// references. Each CUDA call includes host<->device copies (the API takes
// host buffers), so the figures are end-to-end, not kernel-only; device
// buffers come from the thread's arena, and the counter mallocs_per_iter
// (cudaMalloc calls per iteration once warm) should read 0.
// Skips with an error line when no CUDA device is present.
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/cuda/cuda_ops.h"
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

// cudaMalloc calls per iteration of the timed loop (after one warm-up call).
class MallocCounter {
 public:
  MallocCounter() : start_(CudaArenaStats().allocations) {}
  void Report(benchmark::State& state) const {
    state.counters["mallocs_per_iter"] =
        static_cast<double>(CudaArenaStats().allocations - start_) /
        static_cast<double>(state.iterations() > 0 ? state.iterations() : 1);
  }

 private:
  int64_t start_;
};

// Spotlight retrieval top-k over n keys, 4 GQA query heads, 128-bit codes.
void RunHammingTopK(benchmark::State& state, Backend backend) {
  if (backend == Backend::kCuda && !CudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0), k = state.range(1);
  const PackedCodes q = *PackSignBits(RandomTensor({4, 128}, 1));
  const PackedCodes keys = *PackSignBits(RandomTensor({n, 128}, 2));
  benchmark::DoNotOptimize(HammingTopK(q, keys, k, backend));
  const MallocCounter mallocs;
  for (auto _ : state) benchmark::DoNotOptimize(HammingTopK(q, keys, k, backend));
  mallocs.Report(state);
  state.counters["keys_per_s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_HammingTopKCuda(benchmark::State& state) { RunHammingTopK(state, Backend::kCuda); }
void BM_HammingTopKCpu(benchmark::State& state) { RunHammingTopK(state, Backend::kCpu); }
BENCHMARK(BM_HammingTopKCuda)
    ->Args({512 * 1024, 2048})
    ->Args({8 * 1024 * 1024, 2048})
    ->Args({8 * 1024 * 1024, 163840})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_HammingTopKCpu)
    ->Args({512 * 1024, 2048})
    ->Args({8 * 1024 * 1024, 2048})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Ada-KV compaction (budgets, per-head top-k, gather) of an 8-head cache of
// L = range(0) prefill tokens, d = 128, budget range(1), window 32; the CUDA
// variant gathers on the host (range(2) = 0: only the scores are uploaded)
// or on the device (1: the whole k/v cache is uploaded every call).
struct AdaKvInputs {
  Tensor scores, k, v;
  int64_t window = 32;
  explicit AdaKvInputs(int64_t l)
      : scores(RandomTensor({8, l}, 1)),
        k(RandomTensor({8, l + 32, 128}, 2)),
        v(RandomTensor({8, l + 32, 128}, 3)) {}
};

void BM_AdaKvCompactCuda(benchmark::State& state) {
  if (!CudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const AdaKvInputs in(state.range(0));
  const int64_t bp = state.range(1) - in.window;
  const AdaKvGather gather = state.range(2) == 0 ? AdaKvGather::kHost : AdaKvGather::kDevice;
  benchmark::DoNotOptimize(AdaKvCompactCuda(in.scores, in.k, in.v, in.window, bp, 0.2, gather));
  const MallocCounter mallocs;
  for (auto _ : state) {
    benchmark::DoNotOptimize(AdaKvCompactCuda(in.scores, in.k, in.v, in.window, bp, 0.2, gather));
  }
  mallocs.Report(state);
}
BENCHMARK(BM_AdaKvCompactCuda)
    ->Args({8192, 1024, 0})
    ->Args({8192, 1024, 1})
    ->Args({32768, 2048, 0})
    ->Args({32768, 2048, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_AdaKvCompactCpu(benchmark::State& state) {
  const AdaKvInputs in(state.range(0));
  const int64_t bp = state.range(1) - in.window;
  for (auto _ : state) {
    BudgetAllocation alloc = *AllocateBudgets(in.scores, bp, 0.2);
    auto kept = *SelectKept(in.scores, alloc.caps, in.window);
    benchmark::DoNotOptimize(CompactKvCache(in.k, in.v, std::move(kept)));
  }
}
BENCHMARK(BM_AdaKvCompactCpu)
    ->Args({8192, 1024})
    ->Args({32768, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One decode step over a compacted cache: 8 KV heads x G = 4, d = 128,
// range(0) kept entries per head.
CompactKv DecodeCache(int64_t per_head) {
  const int64_t hkv = 8, d = 128;
  std::vector<std::vector<int64_t>> kept(hkv);
  for (auto& head : kept) {
    for (int64_t i = 0; i < per_head; ++i) head.push_back(i);
  }
  return *CompactKvCache(RandomTensor({hkv, per_head, d}, 1), RandomTensor({hkv, per_head, d}, 2),
                         std::move(kept));
}

void RunCompactDecode(benchmark::State& state, Backend backend) {
  if (backend == Backend::kCuda && !CudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const CompactKv cache = DecodeCache(state.range(0));
  const Tensor q = RandomTensor({32, 128}, 3);
  const auto step = [&]() {
    return backend == Backend::kCuda ? CompactDecodeAttentionCuda(q, cache)
                                     : CompactDecodeAttention(q, cache);
  };
  benchmark::DoNotOptimize(step());
  const MallocCounter mallocs;
  for (auto _ : state) benchmark::DoNotOptimize(step());
  mallocs.Report(state);
  state.counters["cache_bytes"] = 2.0 * 8 * state.range(0) * 128 * sizeof(float);
}
void BM_CompactDecodeCuda(benchmark::State& state) { RunCompactDecode(state, Backend::kCuda); }
void BM_CompactDecodeCpu(benchmark::State& state) { RunCompactDecode(state, Backend::kCpu); }
BENCHMARK(BM_CompactDecodeCuda)
    ->Arg(1024)
    ->Arg(16384)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_CompactDecodeCpu)->Arg(1024)->Arg(16384)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::kernels
