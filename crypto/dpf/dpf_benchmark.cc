// DPF benchmarks (single thread, buffers reused across iterations):
//   BM_AesMmo/<path>              fixed-key MMO hash throughput
//   BM_DpfKeyGen/<log n>          point DPF key generation
//   BM_DpfFullDomain/<log n>      full-domain evaluation into a buffer, 64-bit
//   BM_DpfFullDomainPath/<log n>/<path>  the same, forced onto one AES path
//   BM_DpfFullDomainAdd/<log n>   full-domain evaluation added into a buffer
//   BM_Sparse*                    PREAMBLE block DPF, D=2^20, B=2^10, k=16
// <path> is the AesPath value: 0 portable, 1 aesni, 2 vaes (zmm), 3 vaes256 (ymm).
#include <vector>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/aes/fixed_key_hash.h"
#include "crypto/dpf/dpf.h"
#include "crypto/dpf/sparse_dpf.h"

namespace tandem::crypto {
namespace {

void BM_AesMmo(benchmark::State& state) {
  const auto path = static_cast<AesPath>(state.range(0));
  if (!AesPathSupported(path)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  auto h = FixedKeyHash::FromName("bench", path).value();
  const size_t n = path == AesPath::kPortable ? 256 : 4096;  // 64 KiB: stays in L2
  std::vector<Block> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = Block{i, ~i};
  for (auto _ : state) {
    h.Hash(buf, absl::MakeSpan(buf));
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(std::string(AesPathName(path)));
}
BENCHMARK(BM_AesMmo)->Arg(0)->Arg(1)->Arg(2)->Arg(3);

void BM_DpfKeyGen(benchmark::State& state) {
  auto dpf = Dpf::Create(state.range(0), 64).value();
  auto rng = DeterministicRandom::FromSeed(1);
  uint64_t alpha = 12345 % dpf.domain_size();
  for (auto _ : state) {
    auto keys = dpf.GenerateKeys(alpha, 42, rng.get());
    benchmark::DoNotOptimize(keys);
  }
}
BENCHMARK(BM_DpfKeyGen)->Arg(20);

void RunFullDomain(benchmark::State& state, AesPath path) {
  auto dpf = Dpf::Create(state.range(0), 64, path).value();
  auto rng = DeterministicRandom::FromSeed(2);
  auto keys = dpf.GenerateKeys(dpf.domain_size() / 3, 42, rng.get()).value();
  std::vector<uint64_t> out(dpf.domain_size());
  BlockDpfScratch scratch;
  for (auto _ : state) {
    if (!dpf.EvaluateFullDomain<uint64_t>(keys.first, absl::MakeSpan(out), &scratch).ok()) {
      state.SkipWithError("evaluation failed");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * dpf.domain_size());
  state.SetBytesProcessed(state.iterations() * dpf.domain_size() * 8);
  state.SetLabel(std::string(AesPathName(path)));
}

void BM_DpfFullDomain(benchmark::State& state) { RunFullDomain(state, BestAesPath()); }
BENCHMARK(BM_DpfFullDomain)->Arg(16)->Arg(20)->Unit(benchmark::kMicrosecond);

// Forced path (the library default stays BestAesPath()): shows the AES-NI and
// VAES-256 figures on an AVX-512 CPU.
void BM_DpfFullDomainPath(benchmark::State& state) {
  const auto path = static_cast<AesPath>(state.range(1));
  if (!AesPathSupported(path)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  RunFullDomain(state, path);
}
BENCHMARK(BM_DpfFullDomainPath)
    ->Args({20, 1})
    ->Args({20, 3})
    ->Args({20, 2})
    ->Unit(benchmark::kMicrosecond);

void BM_DpfFullDomainAdd(benchmark::State& state) {
  auto dpf = Dpf::Create(state.range(0), 64).value();
  auto rng = DeterministicRandom::FromSeed(2);
  auto keys = dpf.GenerateKeys(dpf.domain_size() / 3, 42, rng.get()).value();
  std::vector<uint64_t> acc(dpf.domain_size());
  BlockDpfScratch scratch;
  for (auto _ : state) {
    if (!dpf.EvaluateAndAdd<uint64_t>(keys.first, absl::MakeSpan(acc), &scratch).ok()) {
      state.SkipWithError("evaluation failed");
      return;
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * dpf.domain_size());
}
BENCHMARK(BM_DpfFullDomainAdd)->Arg(20)->Unit(benchmark::kMicrosecond);

constexpr uint64_t kSparseDim = 1 << 20;
constexpr int kSparseB = 1 << 10;
constexpr int kSparseK = 16;

struct SparseFixture {
  SparseDpf dpf = SparseDpf::Create(kSparseDim, kSparseB, kSparseK, 64).value();
  std::vector<uint32_t> idx;
  std::vector<uint64_t> values;
  SparseFixture() {
    for (int g = 0; g < kSparseK; ++g) idx.push_back((7 * g + 3) % dpf.blocks_per_group());
    for (int i = 0; i < kSparseK * kSparseB; ++i) values.push_back(0x9e3779b97f4a7c15ULL * i);
  }
};

void BM_SparseKeyGen(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(3);
  size_t bytes = 0;
  for (auto _ : state) {
    auto keys = f.dpf.GenerateKeys(f.idx, f.values, rng.get());
    bytes = keys->first.ByteSizeLong();
    benchmark::DoNotOptimize(keys);
  }
  state.counters["upload_bytes_per_server"] = static_cast<double>(bytes);
  state.counters["ratio_vs_dense_2D8"] = 2.0 * bytes / (2.0 * kSparseDim * 8);
}
BENCHMARK(BM_SparseKeyGen)->Unit(benchmark::kMicrosecond);

void BM_SparseKeyGenAndSerialize(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(3);
  std::string wire0, wire1;
  for (auto _ : state) {
    auto keys = f.dpf.GenerateKeys(f.idx, f.values, rng.get());
    keys->first.SerializeToString(&wire0);
    keys->second.SerializeToString(&wire1);
    benchmark::DoNotOptimize(wire0.data());
  }
}
BENCHMARK(BM_SparseKeyGenAndSerialize)->Unit(benchmark::kMicrosecond);

void BM_SparseEvaluateAndAccumulate(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(4);
  auto keys = f.dpf.GenerateKeys(f.idx, f.values, rng.get()).value();
  std::vector<uint64_t> acc(kSparseDim);
  SparseDpfScratch scratch;
  for (auto _ : state) {
    auto d = f.dpf.EvaluateAndAccumulate(keys.first, absl::MakeSpan(acc), &scratch);
    if (!d.ok()) {
      state.SkipWithError("evaluation failed");
      return;
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * kSparseDim);
  // AES blocks per evaluation: leaf expansion D*64/128, tree, 4 proof hashes per leaf.
  state.counters["aes_blocks"] = kSparseDim / 2 + 5.0 * kSparseDim / kSparseB;
}
BENCHMARK(BM_SparseEvaluateAndAccumulate)->Unit(benchmark::kMicrosecond);

void BM_SparseAccumulate(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(4);
  auto keys = f.dpf.GenerateKeys(f.idx, f.values, rng.get()).value();
  std::vector<uint64_t> acc(kSparseDim);
  SparseDpfScratch scratch;
  for (auto _ : state) {
    if (!f.dpf.Accumulate(keys.first, absl::MakeSpan(acc), &scratch).ok()) {
      state.SkipWithError("evaluation failed");
      return;
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * kSparseDim);
}
BENCHMARK(BM_SparseAccumulate)->Unit(benchmark::kMicrosecond);

void BM_SparseProofDigest(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(5);
  auto keys = f.dpf.GenerateKeys(f.idx, f.values, rng.get()).value();
  SparseDpfScratch scratch;
  for (auto _ : state) {
    auto d = f.dpf.ComputeProofDigest(keys.first, &scratch);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_SparseProofDigest)->Unit(benchmark::kMicrosecond);

// Many clients' key sets into one accumulator (the aggregator's inner loop).
void BM_SparseAccumulateManyKeys(benchmark::State& state) {
  SparseFixture f;
  auto rng = DeterministicRandom::FromSeed(6);
  const int n = static_cast<int>(state.range(0));
  std::vector<proto::SparseKeySet> sets;
  for (int i = 0; i < n; ++i) sets.push_back(f.dpf.GenerateKeys(f.idx, f.values, rng.get())->first);
  std::vector<uint64_t> acc(kSparseDim);
  SparseDpfScratch scratch;
  for (auto _ : state) {
    for (const auto& s : sets) {
      auto st = f.dpf.Accumulate(s, absl::MakeSpan(acc), &scratch);
      benchmark::DoNotOptimize(st);
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SparseAccumulateManyKeys)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::crypto
