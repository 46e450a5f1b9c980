// Every CUDA kernel against its CPU reference on seeded random inputs.
// Label gpu; each test skips when no CUDA device is present (CPU-only
// builds and machines without a driver pass by skipping).
// Tolerance: 2e-5 absolute for float attention (different summation order,
// online softmax); bit-exact for the integer Hamming scores, the top-k
// positions, the Ada-KV budgets, kept positions and gathered rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/cuda/cuda_ops.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;

#define TANDEM_SKIP_WITHOUT_GPU()                                   \
  if (!CudaDeviceAvailable()) {                                     \
    GTEST_SKIP() << "no CUDA device: " << ActiveBackendDescription(); \
  }

TEST(CudaEquivalence, DusaStagesAndForwardMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 64, 128}) {
    SCOPED_TRACE(d);
    const Tensor q = RandomTensor({2, 3, 256, d}, 1), k = RandomTensor({2, 3, 256, d}, 2),
                 v = RandomTensor({2, 3, 256, d}, 3);
    for (int64_t b : {1, 16, 32, 256}) {
      SCOPED_TRACE(b);
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor cpu, DusaForward(q, k, v, b, Backend::kCpu));
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gpu, DusaForward(q, k, v, b, Backend::kCuda));
      EXPECT_LT(MaxAbsDiff(cpu, gpu), 2e-5);
    }
  }
}

TEST(CudaEquivalence, HammingScoresAreBitExact) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Tensor qh = RandomTensor({4, 128}, 4), kh = RandomTensor({100003, 128}, 5);
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes qc, PackSignBits(qh));
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes kc, PackSignBits(kh));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto cpu, HammingScores(qc, kc, Backend::kCpu));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto gpu, HammingScores(qc, kc, Backend::kCuda));
  EXPECT_EQ(cpu, gpu);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto top_cpu, HammingTopK(qc, kc, 2000, Backend::kCpu));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto top_gpu, HammingTopK(qc, kc, 2000, Backend::kCuda));
  EXPECT_EQ(top_cpu, top_gpu);
}

// Random codes of rows x words; with `distinct` values per word only (small
// alphabets force many equal scores, i.e. ties).
PackedCodes RandomCodes(int64_t rows, int64_t words, uint64_t seed, uint32_t distinct = 0) {
  std::mt19937_64 gen(seed);
  PackedCodes c;
  c.rows = rows;
  c.words = words;
  c.bits.resize(static_cast<size_t>(rows * words));
  for (uint32_t& w : c.bits) {
    w = static_cast<uint32_t>(gen());
    if (distinct > 0) w = (w % distinct) * 0x9e3779b9u;
  }
  return c;
}

TEST(CudaEquivalence, HammingTopKMatchesCpuOnEdgeCases) {
  TANDEM_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t queries, keys, words;
    uint32_t distinct;
  };
  const Case cases[] = {{1, 1, 1, 0},     {1, 31, 1, 0},     {4, 33, 4, 0},
                        {2, 1000, 1, 3},  {4, 4097, 4, 0},   {1, 5000, 2, 1},
                        {8, 65537, 4, 0}, {3, 100003, 1, 5}, {1, 12345, 128, 0}};
  uint64_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.queries << "x" << c.words << " over " << c.keys
                                      << " keys, distinct " << c.distinct);
    const PackedCodes q = RandomCodes(c.queries, c.words, ++seed, c.distinct);
    const PackedCodes k = RandomCodes(c.keys, c.words, ++seed, c.distinct);
    for (int64_t top :
         {int64_t{1}, int64_t{2}, int64_t{31}, int64_t{1024}, c.keys / 2, c.keys - 1, c.keys}) {
      if (top < 1 || top > c.keys) continue;
      SCOPED_TRACE(top);
      TANDEM_ASSERT_OK_AND_ASSIGN(auto cpu, HammingTopK(q, k, top, Backend::kCpu));
      TANDEM_ASSERT_OK_AND_ASSIGN(auto gpu, HammingTopK(q, k, top, Backend::kCuda));
      ASSERT_EQ(cpu, gpu);
    }
  }
  // Errors are the CPU backend's.
  const PackedCodes q = RandomCodes(1, 2, 1), k = RandomCodes(10, 2, 2);
  EXPECT_EQ(HammingTopK(q, k, 0, Backend::kCuda).status().code(),
            HammingTopK(q, k, 0, Backend::kCpu).status().code());
  EXPECT_EQ(HammingTopK(q, k, 11, Backend::kCuda).status().code(),
            HammingTopK(q, k, 11, Backend::kCpu).status().code());
}

// (H_kv, L) scores: continuous, quantised to a few levels (ties across and
// within heads), all equal, or mixing -0.0 and +0.0.
Tensor AdaKvScores(int64_t hkv, int64_t l, int kind, uint64_t seed) {
  Tensor s = RandomTensor({hkv, l}, seed);
  for (float& x : s.mutable_data()) {
    if (kind == 1) x = std::round(x * 2.0f) / 2.0f;
    if (kind == 2) x = 0.25f;
    if (kind == 3) x = x > 0 ? 0.0f : -0.0f;
  }
  return s;
}

void ExpectSameCompaction(const Tensor& scores, const Tensor& k, const Tensor& v, int64_t window,
                          int64_t budget_prime, double alpha) {
  TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation alloc, AllocateBudgets(scores, budget_prime, alpha));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto kept, SelectKept(scores, alloc.caps, window));
  TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv cpu, CompactKvCache(k, v, kept));
  for (AdaKvGather gather : {AdaKvGather::kHost, AdaKvGather::kDevice}) {
    SCOPED_TRACE(gather == AdaKvGather::kHost ? "host gather" : "device gather");
    TANDEM_ASSERT_OK_AND_ASSIGN(
        AdaKvCudaResult gpu, AdaKvCompactCuda(scores, k, v, window, budget_prime, alpha, gather));
    EXPECT_EQ(alloc.counts, gpu.allocation.counts);
    EXPECT_EQ(alloc.caps, gpu.allocation.caps);
    EXPECT_EQ(cpu.cu_seqlens, gpu.cache.cu_seqlens);
    EXPECT_EQ(cpu.kept, gpu.cache.kept);
    EXPECT_EQ(MaxAbsDiff(cpu.keys, gpu.cache.keys), 0.0);
    EXPECT_EQ(MaxAbsDiff(cpu.values, gpu.cache.values), 0.0);
  }
}

TEST(CudaEquivalence, AdaKvCompactionMatchesCpuExactly) {
  TANDEM_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t hkv, l, window, extra, d;
  };
  const Case cases[] = {{1, 1, 0, 0, 8},     {1, 1, 1, 0, 8},       {2, 31, 1, 2, 16},
                        {3, 33, 32, 0, 64},  {8, 1000, 32, 0, 128}, {4, 5000, 7, 3, 100},
                        {2, 4097, 16, 0, 32}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const int64_t n = c.l + c.window + c.extra;
    const Tensor k = RandomTensor({c.hkv, n, c.d}, ++seed),
                 v = RandomTensor({c.hkv, n, c.d}, ++seed);
    for (int kind = 0; kind < 4; ++kind) {
      const Tensor scores = AdaKvScores(c.hkv, c.l, kind, ++seed);
      for (int64_t bp : {int64_t{0}, int64_t{1}, c.l / 3, c.l - 1, c.l, c.l + 5}) {
        for (double alpha : {0.0, 0.2, 0.5, 1.0}) {
          SCOPED_TRACE(::testing::Message()
                       << "hkv " << c.hkv << " L " << c.l << " w " << c.window << " kind " << kind
                       << " B' " << bp << " alpha " << alpha);
          ExpectSameCompaction(scores, k, v, c.window, bp, alpha);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(CudaEquivalence, AdaKvCompressMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Tensor q = RandomTensor({8, 600, 64}, 1), k = RandomTensor({2, 600, 64}, 2),
               v = RandomTensor({2, 600, 64}, 3);
  for (int64_t budget : {32, 100, 600}) {
    SCOPED_TRACE(budget);
    AdaKvOptions opt;
    opt.budget = budget;
    TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv cpu, AdaKvCompress(q, k, v, opt));
    TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv gpu,
                                AdaKvCompressCuda(q, k, v, opt, AdaKvGather::kDevice));
    EXPECT_EQ(cpu.kept, gpu.kept);
    EXPECT_EQ(cpu.cu_seqlens, gpu.cu_seqlens);
    EXPECT_EQ(MaxAbsDiff(cpu.keys, gpu.keys), 0.0);
    EXPECT_EQ(MaxAbsDiff(cpu.values, gpu.values), 0.0);
  }
  AdaKvOptions bad;
  bad.budget = 8;  // < window
  EXPECT_EQ(AdaKvCompressCuda(q, k, v, bad).status().code(),
            AdaKvCompress(q, k, v, bad).status().code());
}

TEST(CudaEquivalence, CompactDecodeMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t hkv, group, l, window, d, budget_prime;
  };
  const Case cases[] = {{1, 1, 1, 0, 8, 1},           {2, 4, 31, 1, 33, 5},
                        {4, 2, 1000, 32, 64, 300},    {8, 4, 5000, 32, 128, 4000},
                        {1, 8, 20000, 0, 256, 20000}, {2, 1, 300, 3, 100, 0}};
  uint64_t seed = 1000;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "hkv " << c.hkv << " G " << c.group << " L " << c.l
                                      << " d " << c.d << " B' " << c.budget_prime);
    const int64_t n = c.l + c.window;
    const Tensor k = RandomTensor({c.hkv, n, c.d}, ++seed),
                 v = RandomTensor({c.hkv, n, c.d}, ++seed);
    const Tensor scores = RandomTensor({c.hkv, c.l}, ++seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(BudgetAllocation alloc,
                                AllocateBudgets(scores, c.budget_prime, 0.2));
    TANDEM_ASSERT_OK_AND_ASSIGN(auto kept, SelectKept(scores, alloc.caps, c.window));
    bool empty = false;
    for (const auto& head : kept) empty |= head.empty();
    if (empty) continue;  // CompactDecodeAttention rejects a head with no entries
    TANDEM_ASSERT_OK_AND_ASSIGN(CompactKv cache, CompactKvCache(k, v, kept));
    const Tensor q = RandomTensor({c.hkv * c.group, c.d}, ++seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor cpu, CompactDecodeAttention(q, cache));
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gpu, CompactDecodeAttentionCuda(q, cache));
    EXPECT_LT(MaxAbsDiff(cpu, gpu), 2e-5);
  }
}

TEST(CudaEquivalence, WarmCallsAllocateNothing) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Tensor q = RandomTensor({1, 2, 512, 64}, 1), k = RandomTensor({1, 2, 512, 64}, 2),
               v = RandomTensor({1, 2, 512, 64}, 3);
  const PackedCodes qc = RandomCodes(4, 4, 4), kc = RandomCodes(50000, 4, 5);
  const Tensor scores = RandomTensor({4, 2000}, 6), kk = RandomTensor({4, 2032, 64}, 7),
               vv = RandomTensor({4, 2032, 64}, 8);
  const Tensor dq = RandomTensor({16, 64}, 9);
  auto run_all = [&]() {
    TANDEM_ASSERT_OK(DusaForward(q, k, v, 32, Backend::kCuda).status());
    TANDEM_ASSERT_OK(HammingScores(qc, kc, Backend::kCuda).status());
    TANDEM_ASSERT_OK(HammingTopK(qc, kc, 500, Backend::kCuda).status());
    TANDEM_ASSERT_OK(AdaKvCompactCuda(scores, kk, vv, 32, 200, 0.2).status());
    TANDEM_ASSERT_OK_AND_ASSIGN(
        AdaKvCudaResult r, AdaKvCompactCuda(scores, kk, vv, 32, 200, 0.2, AdaKvGather::kDevice));
    TANDEM_ASSERT_OK(CompactDecodeAttentionCuda(dq, r.cache).status());
  };
  run_all();
  if (HasFatalFailure()) return;
  const CudaArenaCounters warm = CudaArenaStats();
  EXPECT_GT(warm.allocations, 0);
  EXPECT_GT(warm.bytes_live, 0);
  run_all();
  if (HasFatalFailure()) return;
  const CudaArenaCounters again = CudaArenaStats();
  EXPECT_EQ(again.allocations, warm.allocations);
  EXPECT_EQ(again.bytes_allocated, warm.bytes_allocated);
  // Smaller shapes fit the grown buffers too.
  TANDEM_ASSERT_OK(HammingTopK(qc, RandomCodes(1000, 4, 11), 10, Backend::kCuda).status());
  EXPECT_EQ(CudaArenaStats().allocations, warm.allocations);
  // Release frees this thread's buffers; the next call allocates again.
  CudaArenaRelease();
  EXPECT_LT(CudaArenaStats().bytes_live, again.bytes_live);
  TANDEM_ASSERT_OK(HammingScores(qc, kc, Backend::kCuda).status());
  EXPECT_GT(CudaArenaStats().allocations, warm.allocations);
}

TEST(CudaEquivalence, ThreadsUseTheirOwnArenaFreedAtExit) {
  TANDEM_SKIP_WITHOUT_GPU();
  const PackedCodes qc = RandomCodes(2, 4, 21, 7), kc = RandomCodes(30011, 4, 22, 7);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto expected, HammingTopK(qc, kc, 777, Backend::kCpu));
  const CudaArenaCounters before = CudaArenaStats();
  constexpr int kThreadCount = 4;
  std::vector<std::vector<int64_t>> got(kThreadCount);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadCount; ++t) {
    threads.emplace_back([&, t]() {
      for (int rep = 0; rep < 3; ++rep) {
        auto r = HammingTopK(qc, kc, 777, Backend::kCuda);
        if (r.ok()) got[t] = *std::move(r);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreadCount; ++t) EXPECT_EQ(got[t], expected) << "thread " << t;
  const CudaArenaCounters after = CudaArenaStats();
  // Each new thread warmed its own arena once; the exited threads freed it.
  EXPECT_GT(after.allocations, before.allocations);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
}

TEST(CudaEquivalence, ChooseBackendPrefersCudaWithDevice) {
  TANDEM_SKIP_WITHOUT_GPU();
  EXPECT_THAT(ChooseBackend("", true), ::tandem::testing::IsOkAndHolds(Backend::kCuda));
}

}  // namespace
}  // namespace tandem::ml::kernels
