// Benchmark-only: this machine's roofs, measured once per process with every
// oneTBB thread — memory bandwidth (STREAM-like triad over 3 x 64 MiB) and
// peak multiply-add throughput in float32 and float64 (16 AVX-512 registers
// of independent FMA chains) — and counters that put each benchmark's rate
// beside them (bench/*.md divide one by the other). Header-only.
#ifndef TANDEM_ML_KERNELS_TESTING_MACHINE_ROOFS_H_
#define TANDEM_ML_KERNELS_TESTING_MACHINE_ROOFS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml::kernels::testing {

struct Roofs {
  double bw_gbps = 0;
  double flop_gflops = 0;  // float32
  double fp64_gflops = 0;
};

namespace roofs_internal {

inline double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// FLOP/s of independent chains acc = acc * m + add (2 FLOPs each).
template <typename T, int kLanes>
double FmaRoof() {
  const int threads = tbb::this_task_arena::max_concurrency();
  constexpr int64_t kIters = 2000000;
  std::vector<T> sink(static_cast<size_t>(threads));
  const auto t0 = std::chrono::steady_clock::now();
  tbb::parallel_for(0, threads, [&](int t) {
    T acc[kLanes];
    for (int i = 0; i < kLanes; ++i) acc[i] = T(1) + T(i) * T(1e-6);
    const T m = T(0.999999), add = T(1e-7) * T(t + 1);
    for (int64_t it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) acc[i] = acc[i] * m + add;
    }
    T s = 0;
    for (T x : acc) s += x;
    sink[static_cast<size_t>(t)] = s;
  });
  const double secs = Seconds(t0);
  benchmark::DoNotOptimize(sink.data());
  return 2.0 * kLanes * kIters * threads / secs;
}

}  // namespace roofs_internal

inline const Roofs& MachineRoofs() {
  static const Roofs roofs = [] {
    Roofs r;
    const size_t n = size_t{16} << 20;
    std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.5f);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1 << 16), [&](const auto& rg) {
        for (size_t i = rg.begin(); i < rg.end(); ++i) a[i] = b[i] + 3.0f * c[i];
      });
      best = std::min(best, roofs_internal::Seconds(t0));
    }
    r.bw_gbps = 3.0 * n * sizeof(float) / best / 1e9;
    r.flop_gflops = roofs_internal::FmaRoof<float, 256>() / 1e9;   // 16 zmm x 16 floats
    r.fp64_gflops = roofs_internal::FmaRoof<double, 128>() / 1e9;  // 16 zmm x 8 doubles
    return r;
  }();
  return roofs;
}

// Rate counters from per-iteration work, next to the roofs (Google
// Benchmark rates are only final after the loop).
inline void ReportFlops(benchmark::State& state, double flops_per_iter, bool fp64 = false) {
  const double total = flops_per_iter * static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  if (fp64) {
    state.counters["fp64_roof_GFLOPs"] = MachineRoofs().fp64_gflops;
  } else {
    state.counters["flop_roof_GFLOPs"] = MachineRoofs().flop_gflops;
  }
}
inline void ReportBytes(benchmark::State& state, double bytes_per_iter) {
  const double total = bytes_per_iter * static_cast<double>(state.iterations());
  state.counters["GBps"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.counters["bw_roof_GBps"] = MachineRoofs().bw_gbps;
}

}  // namespace tandem::ml::kernels::testing

#endif  // TANDEM_ML_KERNELS_TESTING_MACHINE_ROOFS_H_
