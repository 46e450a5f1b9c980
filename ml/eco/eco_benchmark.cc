// ECO kernel: learngene extract + insert, a strided gather/scatter of the
// kept sub-tensors, reported against a one-thread copy roof (std::copy of
// 64 MiB, read + write bytes) measured at startup. The generational loop
// itself is dominated by ml/train (see ml_train_benchmark).
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "ml/eco/genetic_transfer.h"
#include "ml/eco/learngene.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml::eco {
namespace {

double CopyRoofGbps() {
  static const double roof = [] {
    const size_t n = size_t{16} << 20;
    std::vector<float> a(n, 1.0f), b(n, 2.0f);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      std::copy(b.begin(), b.end(), a.begin());
      benchmark::DoNotOptimize(a.data());
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return 2.0 * n * sizeof(float) / best / 1e9;  // one thread: read + write
  }();
  return roof;
}

// Args: conv1, conv2, hidden channels.
void BM_ExtractInsert(benchmark::State& state) {
  auto m = *MakeCnn({1, 8, 8}, 5, {state.range(0), state.range(1), state.range(2)});
  m->InitFromSeed(1);
  const GeneLayout lay = *CnnGeneLayout(*m);
  const auto masks = *SelectCircuit(*m, lay, 0.45);
  auto target = m->Clone();
  int64_t kept = 0;
  for (auto _ : state) {
    auto g = ExtractLearngene(*m, lay, masks);
    benchmark::DoNotOptimize(InsertLearngene(*g, lay, target.get()));
    kept = g->num_params();
  }
  state.counters["GBps"] = benchmark::Counter(2.0 * 2 * 4 * kept * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["copy_roof_GBps"] = CopyRoofGbps();
  state.counters["kept_params"] = static_cast<double>(kept);
}
BENCHMARK(BM_ExtractInsert)->Name("BM_ExtractInsert_Small")->Args({8, 12, 16})->UseRealTime();
BENCHMARK(BM_ExtractInsert)->Args({16, 32, 64})->Args({64, 128, 512})->UseRealTime();

}  // namespace
}  // namespace tandem::ml::eco
