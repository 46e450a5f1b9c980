// Norm proofs per report (client proof generation, server verification)
// beside the DPF full-domain expansion the servers need anyway. Arg: D;
// B = 2^10 (or D/64 when smaller), k = 16, 64-bit values, the bound of
// C = 1 at 16 fraction bits. Buffers are reused across iterations.
#include <optional>
#include <vector>

#include "benchmark/benchmark.h"
#include "base/random.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/norm_proof.h"

namespace tandem::crypto::proof {
namespace {

constexpr int kGroups = 16;

struct Setup {
  int block;
  uint64_t dim;
  proto::BlockDpfParameters group;
  std::optional<SparseDpf> dpf;
  std::optional<NormProofSystem> sys;
  std::vector<uint32_t> idx;
  std::pair<proto::SparseKeySet, proto::SparseKeySet> keys;
  std::string id = std::string(16, 'i');
};

Setup Make(uint64_t dim) {
  Setup s;
  s.block = static_cast<int>(std::min<uint64_t>(1024, dim / 64));
  s.dim = dim;
  const uint64_t blocks = dim / kGroups / s.block;
  s.group.set_log_num_blocks(std::countr_zero(blocks));
  s.group.set_block_size(s.block);
  s.group.set_value_bits(64);
  const uint64_t bound = L2SquaredBoundForClip(1.0, 16, uint64_t{kGroups} * s.block);
  proto::NormBoundParameters b;
  b.set_max_block_l2_squared(bound);
  b.set_max_l2_squared(bound);
  s.dpf.emplace(SparseDpf::Create(dim, s.block, kGroups, 64).value());
  s.sys.emplace(NormProofSystem::Create(s.group, kGroups, b).value());
  auto rng = DeterministicRandom::FromSeed(1);
  // Values of a unit-norm vector at 16 fraction bits: |v| <= 2^16 / sqrt(n).
  std::vector<uint64_t> v(static_cast<size_t>(kGroups) * s.block);
  for (auto& x : v) x = static_cast<uint64_t>(int64_t(rng->NextUint64().value() % 1025) - 512);
  for (int g = 0; g < kGroups; ++g) s.idx.push_back(rng->NextUint64().value() % blocks);
  s.keys = s.dpf->GenerateKeys(s.idx, v, rng.get()).value();
  return s;
}

void BM_Prove(benchmark::State& state) {
  Setup s = Make(state.range(0));
  auto rng = DeterministicRandom::FromSeed(2);
  for (auto _ : state) {
    auto p = s.sys->Prove(s.id, s.keys.first, s.keys.second, s.idx, rng.get());
    benchmark::DoNotOptimize(p);
  }
  state.counters["proof_elems"] = s.sys->circuit().flp().proof_length();
}

// One server: limb derivation from its expansion, query, decide.
void BM_Verify(benchmark::State& state) {
  Setup s = Make(state.range(0));
  auto rng = DeterministicRandom::FromSeed(3);
  auto proof = s.sys->Prove(s.id, s.keys.first, s.keys.second, s.idx, rng.get()).value();
  SparseDpfScratch scratch;
  std::vector<uint64_t> expansion(s.dim, 0), derived(s.sys->circuit().derived_length());
  (void)s.dpf->EvaluateAndAccumulate(s.keys.first, absl::MakeSpan(expansion), &scratch);
  std::vector<uint64_t> e1(s.dim, 0), d1(derived.size());
  (void)s.dpf->EvaluateAndAccumulate(s.keys.second, absl::MakeSpan(e1), &scratch);
  (void)s.sys->DeriveInputShare(1, e1, absl::MakeSpan(d1));
  const std::string seed(32, 's');
  auto peer = s.sys->Query(1, s.id, s.keys.second, proof.second, d1, seed).value();
  bool ok = false;
  for (auto _ : state) {
    (void)s.sys->DeriveInputShare(0, expansion, absl::MakeSpan(derived));
    auto mine = s.sys->Query(0, s.id, s.keys.first, proof.first, derived, seed);
    ok = mine.ok() && s.sys->Decide(*mine, peer);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("honest report rejected");
  state.counters["verifier_elems"] = s.sys->circuit().flp().verifier_length();
}

// The expansion itself (what verification is compared with).
void BM_Expansion(benchmark::State& state) {
  Setup s = Make(state.range(0));
  SparseDpfScratch scratch;
  std::vector<uint64_t> expansion(s.dim, 0);
  for (auto _ : state) {
    auto d = s.dpf->EvaluateAndAccumulate(s.keys.first, absl::MakeSpan(expansion), &scratch);
    benchmark::DoNotOptimize(d);
  }
}

BENCHMARK(BM_Prove)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Verify)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Expansion)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::crypto::proof
