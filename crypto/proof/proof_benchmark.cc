// Norm proofs per report (client proof generation, server verification)
// beside the DPF full-domain expansion the servers need anyway. Arg: D;
// B = 2^10 (or D/64 when smaller), k = 16, 64-bit values, the bound of
// C = 1 at 16 fraction bits (D = 2^17 and 2^20 both send 16,384 values).
// BM_FlpProve is the FLP prover alone. Buffers are reused across iterations.
// BM_DenseProve / BM_DenseVerify: the same proof over a dense report of D
// values (dense_norm_proof.h; D = 16,384 is the sent-value count above).
#include <cmath>
#include <optional>
#include <vector>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/dense_norm_proof.h"
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
    auto p = s.sys->Prove(s.id, s.keys.first, s.keys.second, rng.get());
    benchmark::DoNotOptimize(p);
  }
  state.counters["proof_elems"] = s.sys->circuit().flp().proof_length();
  state.counters["proof_bytes"] = 8.0 * s.sys->circuit().flp().proof_length();
  state.counters["soundness_log2"] = s.sys->SoundnessLog2();
}

// The FLP prover alone (RangeSquareFlp::Prove on the circuit's rows,
// random inputs, slot weights and wire seeds): BM_Prove without the two DPF
// evaluations, the witness, the joint randomness and the share split.
void BM_FlpProve(benchmark::State& state) {
  Setup s = Make(state.range(0));
  const RangeSquareFlp& flp = s.sys->circuit().flp();
  auto rng = DeterministicRandom::FromSeed(4);
  std::vector<uint64_t> inputs(flp.input_length()), seeds(flp.seed_length());
  std::vector<uint64_t> rho(flp.range_slots()), proof(flp.proof_length());
  for (auto* v : {&inputs, &seeds, &rho}) {
    for (auto& x : *v) x = gl::Reduce64(rng->NextUint64().value());
  }
  for (auto _ : state) {
    auto st = flp.Prove(inputs, rho, seeds, absl::MakeSpan(proof));
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(proof.data());
  }
  state.counters["rows"] = flp.num_rows();
  state.counters["wires"] = flp.wires();
  state.counters["proof_elems"] = flp.proof_length();
}

// The FLP's shape (issue 36 item 4): the 16,384-value circuit above laid
// out on a wire domain of N = 2^arg points (the fewest values per row C
// whose rows fit). The prover runs 3 transforms of N points per wire (W =
// 3C + 1 wires: ~3 W N log N butterflies, fewer at smaller N), the
// verifier a Lagrange column per wire (~W N Q products: about 3 n Q
// whatever N), the proof holds W Q + 3 N elements and the verifier message
// 1 + Q (W + 1).
struct FlpShape {
  std::optional<RangeSquareFlp> flp;
  std::vector<uint64_t> inputs, seeds, rho, row_weights, proof;
};

FlpShape MakeShape(int log_n) {
  Setup s = Make(1 << 20);
  const NormCircuit& big = s.sys->circuit();
  const size_t n = size_t{1} << log_n;
  FlpShape f;
  for (size_t c = 1; c <= static_cast<size_t>(big.block_size()) && !f.flp.has_value(); ++c) {
    auto circuit = NormCircuit::Create(big.num_blocks(), big.block_size(), big.value_bits(),
                                       big.bound(), c, 2);
    if (circuit.ok() && circuit->flp().wire_domain_size() <= n) f.flp.emplace(circuit->flp());
  }
  auto rng = DeterministicRandom::FromSeed(8);
  f.inputs.resize(f.flp->input_length());
  f.seeds.resize(f.flp->seed_length());
  f.rho.resize(f.flp->range_slots());
  f.row_weights.resize(f.flp->num_rows());
  f.proof.resize(f.flp->proof_length());
  for (auto* v : {&f.inputs, &f.seeds, &f.rho, &f.row_weights}) {
    for (auto& x : *v) x = gl::Reduce64(rng->NextUint64().value());
  }
  return f;
}

void ShapeCounters(const RangeSquareFlp& flp, benchmark::State& state) {
  state.counters["N"] = static_cast<double>(flp.wire_domain_size());
  state.counters["per_row"] = static_cast<double>(flp.square_slots());
  state.counters["proof_elems"] = static_cast<double>(flp.proof_length());
  state.counters["verifier_elems"] = static_cast<double>(flp.verifier_length());
}

void BM_FlpShapeProve(benchmark::State& state) {
  FlpShape f = MakeShape(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto st = f.flp->Prove(f.inputs, f.rho, f.seeds, absl::MakeSpan(f.proof));
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(f.proof.data());
  }
  ShapeCounters(*f.flp, state);
}

// One verifier's query on the same shape (two query points).
void BM_FlpShapeQuery(benchmark::State& state) {
  FlpShape f = MakeShape(static_cast<int>(state.range(0)));
  if (!f.flp->Prove(f.inputs, f.rho, f.seeds, absl::MakeSpan(f.proof)).ok()) {
    state.SkipWithError("prove failed");
    return;
  }
  const std::vector<uint64_t> points = {uint64_t{1} << 40, (uint64_t{1} << 40) + 12345};
  std::vector<uint64_t> verifier(f.flp->verifier_length());
  if (!f.flp->Query(f.inputs, f.proof, 0, f.row_weights, points, absl::MakeSpan(verifier)).ok()) {
    state.SkipWithError("query refused");  // e.g. a point inside the proof domain
    return;
  }
  for (auto _ : state) {
    auto st = f.flp->Query(f.inputs, f.proof, 0, f.row_weights, points, absl::MakeSpan(verifier));
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(verifier.data());
  }
  ShapeCounters(*f.flp, state);
}

// The circuit's gadget inputs for one share (NormCircuit::GadgetInputs:
// the prover and each verifier run it once per report) from random
// canonical derived values, witness and weights.
void BM_GadgetInputs(benchmark::State& state) {
  Setup s = Make(state.range(0));
  const NormCircuit& c = s.sys->circuit();
  auto rng = DeterministicRandom::FromSeed(6);
  std::vector<uint64_t> derived(c.derived_length()), witness(c.witness_length());
  std::vector<uint64_t> weights(c.weights_length()), inputs(c.flp().input_length());
  for (auto* v : {&derived, &witness, &weights}) {
    for (auto& x : *v) x = gl::Reduce64(rng->NextUint64().value());
  }
  for (auto _ : state) {
    auto st = c.GadgetInputs(0, derived, witness, weights, absl::MakeSpan(inputs));
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(inputs.data());
  }
  state.counters["values"] = static_cast<double>(c.num_values());
}

// One wire of the prover's transforms at N = 256 (the FLP's N at 16,384
// values): the inverse NTT and the two coset NTTs. Arg 0: the portable
// code; 1: the build's (AVX2 lanes where compiled in).
void BM_WireTransforms(benchmark::State& state) {
  const NttDomain domain = NttDomain::Create(8).value();
  auto rng = DeterministicRandom::FromSeed(5);
  std::vector<uint64_t> values(256), coeffs(256), coset(256);
  for (auto& x : values) x = gl::Reduce64(rng->NextUint64().value());
  const bool portable = state.range(0) == 0;
  for (auto _ : state) {
    coeffs = values;
    if (portable) {
      domain.ValuesToCoefficientsPortable(absl::MakeSpan(coeffs));
    } else {
      domain.ValuesToCoefficients(absl::MakeSpan(coeffs));
    }
    for (int s = 1; s < 3; ++s) {
      if (portable) {
        for (size_t j = 0; j < 256; ++j) coset[j] = gl::Mul(coeffs[j], domain.CosetScale(s)[j]);
        domain.CoefficientsToValuesPortable(absl::MakeSpan(coset));
      } else {
        domain.CoefficientsToCosetValues(coeffs, s, absl::MakeSpan(coset));
      }
      benchmark::DoNotOptimize(coset.data());
    }
  }
}

struct VerifySetup {
  Setup s;
  std::pair<proto::NormProofShare, proto::NormProofShare> proof;
  proto::NormProofVerifierShare peer;
  SparseDpfScratch scratch;
  std::vector<uint64_t> derived;
  ProofDigest digest{};
  const std::string seed = std::string(32, 's');
};

VerifySetup MakeVerify(uint64_t dim) {
  VerifySetup v;
  v.s = Make(dim);
  auto rng = DeterministicRandom::FromSeed(3);
  const NormProofSystem& sys = *v.s.sys;
  v.proof = sys.Prove(v.s.id, v.s.keys.first, v.s.keys.second, rng.get()).value();
  v.derived.resize(sys.circuit().derived_length());
  std::vector<uint64_t> d1(v.derived.size());
  const ProofDigest d1_digest =
      sys.EvaluateAndDerive(*v.s.dpf, 1, v.s.keys.second, absl::MakeSpan(d1), &v.scratch).value();
  v.peer = sys.Query(1, v.s.id, v.s.keys.second, v.proof.second, d1, d1_digest, v.seed).value();
  v.digest =
      sys.EvaluateAndDerive(*v.s.dpf, 0, v.s.keys.first, absl::MakeSpan(v.derived), &v.scratch)
          .value();
  return v;
}

// One server's whole verification of a report, as EvaluateNormChecks runs
// it: one full-domain evaluation with the block sums fused in (digest +
// derived shares), query, decide. Compare with BM_Expansion and
// BM_ProofDigest (what a round without norm bound pays at this step).
void BM_Verify(benchmark::State& state) {
  VerifySetup v = MakeVerify(state.range(0));
  const NormProofSystem& sys = *v.s.sys;
  bool ok = false;
  for (auto _ : state) {
    auto digest = sys.EvaluateAndDerive(*v.s.dpf, 0, v.s.keys.first, absl::MakeSpan(v.derived),
                                        &v.scratch);
    if (!digest.ok()) break;
    auto mine = sys.Query(0, v.s.id, v.s.keys.first, v.proof.first, v.derived, *digest, v.seed);
    ok = mine.ok() && sys.Decide(*mine, v.peer);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("honest report rejected");
  state.counters["verifier_elems"] = sys.circuit().flp().verifier_length();
}

// What a server pays per report in a norm round since one expansion serves
// both (aggregator/core/expansion.h): BM_Verify's step with the shares also
// added into the D-sized accumulator in the same pass. The former schedule
// cost BM_Verify + BM_Expansion.
void BM_VerifyAndAccumulate(benchmark::State& state) {
  VerifySetup v = MakeVerify(state.range(0));
  const NormProofSystem& sys = *v.s.sys;
  std::vector<uint64_t> accumulator(v.s.dim, 0);
  bool ok = false;
  for (auto _ : state) {
    auto digest = sys.EvaluateAccumulateAndDerive(*v.s.dpf, 0, v.s.keys.first,
                                                  absl::MakeSpan(accumulator),
                                                  absl::MakeSpan(v.derived), &v.scratch);
    if (!digest.ok()) break;
    auto mine = sys.Query(0, v.s.id, v.s.keys.first, v.proof.first, v.derived, *digest, v.seed);
    ok = mine.ok() && sys.Decide(*mine, v.peer);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("honest report rejected");
}

// The parts of BM_Verify: the fused evaluation alone, and query + decide.
void BM_EvaluateAndDerive(benchmark::State& state) {
  VerifySetup v = MakeVerify(state.range(0));
  for (auto _ : state) {
    auto d = v.s.sys->EvaluateAndDerive(*v.s.dpf, 0, v.s.keys.first, absl::MakeSpan(v.derived),
                                        &v.scratch);
    benchmark::DoNotOptimize(d);
  }
}
void BM_QueryDecide(benchmark::State& state) {
  VerifySetup v = MakeVerify(state.range(0));
  const NormProofSystem& sys = *v.s.sys;
  bool ok = false;
  for (auto _ : state) {
    auto mine = sys.Query(0, v.s.id, v.s.keys.first, v.proof.first, v.derived, v.digest, v.seed);
    ok = mine.ok() && sys.Decide(*mine, v.peer);
    benchmark::DoNotOptimize(ok);
  }
  if (!ok) state.SkipWithError("honest report rejected");
}

// The expansion itself (what verification is compared with): the D-sized
// accumulation every report costs at commit.
void BM_Expansion(benchmark::State& state) {
  Setup s = Make(state.range(0));
  SparseDpfScratch scratch;
  std::vector<uint64_t> expansion(s.dim, 0);
  for (auto _ : state) {
    auto d = s.dpf->EvaluateAndAccumulate(s.keys.first, absl::MakeSpan(expansion), &scratch);
    benchmark::DoNotOptimize(d);
  }
}

// The verification step of a round without norm bound (digest only).
void BM_ProofDigest(benchmark::State& state) {
  Setup s = Make(state.range(0));
  SparseDpfScratch scratch;
  for (auto _ : state) {
    auto d = s.dpf->ComputeProofDigest(s.keys.first, &scratch);
    benchmark::DoNotOptimize(d);
  }
}

// A dense report of D values of norm <= C = 1 at 16 fraction bits.
struct DenseSetup {
  std::optional<DenseNormProof> sys;
  std::pair<proto::DenseShare, proto::DenseShare> shares;
  std::string id = std::string(16, 'i');
};

DenseSetup MakeDense(uint64_t d) {
  DenseSetup s;
  proto::NormBoundParameters bound;
  bound.set_max_l2_squared(L2SquaredBoundForClip(1.0, 16, d));
  bound.set_max_block_l2_squared(bound.max_l2_squared());
  s.sys.emplace(DenseNormProof::Create(d, 64, bound).value());
  std::vector<uint64_t> x(d);
  const int64_t v = static_cast<int64_t>(65536.0 / std::sqrt(static_cast<double>(d)));
  for (uint64_t i = 0; i < d; ++i) x[i] = static_cast<uint64_t>(i % 2 ? v : -v);
  auto rng = DeterministicRandom::FromSeed(5);
  s.shares = s.sys->sharing().Share(x, rng.get()).value();
  return s;
}

void BM_DenseProve(benchmark::State& state) {
  DenseSetup s = MakeDense(static_cast<uint64_t>(state.range(0)));
  auto rng = DeterministicRandom::FromSeed(6);
  for (auto _ : state) {
    auto p = s.sys->Prove(s.id, s.shares.first, s.shares.second, rng.get());
    if (!p.ok()) {
      state.SkipWithError("prove failed");
      return;
    }
    benchmark::DoNotOptimize(p);
  }
}

// Both servers: derive (adding into an accumulator), query, decide.
void BM_DenseVerify(benchmark::State& state) {
  DenseSetup s = MakeDense(static_cast<uint64_t>(state.range(0)));
  auto rng = DeterministicRandom::FromSeed(7);
  auto proofs = s.sys->Prove(s.id, s.shares.first, s.shares.second, rng.get()).value();
  const std::string seed(32, 'q');
  std::vector<uint64_t> acc(s.sys->sharing().dimension(), 0);
  std::vector<uint64_t> d0(s.sys->circuit().derived_length()), d1(d0.size());
  for (auto _ : state) {
    bool ok =
        s.sys->EvaluateAndDerive(0, s.shares.first, absl::MakeSpan(acc), absl::MakeSpan(d0)).ok() &&
        s.sys->EvaluateAndDerive(1, s.shares.second, absl::MakeSpan(acc), absl::MakeSpan(d1)).ok();
    auto q0 = s.sys->Query(0, s.id, s.shares.first, proofs.first, d0, seed);
    auto q1 = s.sys->Query(1, s.id, s.shares.second, proofs.second, d1, seed);
    if (!ok || !q0.ok() || !q1.ok() || !s.sys->Decide(*q0, *q1)) {
      state.SkipWithError("verification failed");
      return;
    }
  }
}

BENCHMARK(BM_Prove)->Arg(4096)->Arg(1 << 17)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlpProve)->Arg(4096)->Arg(1 << 17)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlpShapeProve)->DenseRange(5, 9)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FlpShapeQuery)->DenseRange(5, 9)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GadgetInputs)->Arg(1 << 17)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_WireTransforms)->Arg(0)->Arg(1);
BENCHMARK(BM_Verify)->Arg(4096)->Arg(1 << 17)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VerifyAndAccumulate)
    ->Arg(4096)
    ->Arg(1 << 17)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EvaluateAndDerive)
    ->Arg(4096)
    ->Arg(1 << 17)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryDecide)->Arg(4096)->Arg(1 << 17)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Expansion)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProofDigest)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseProve)->Arg(4096)->Arg(16384)->Arg(1 << 17)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseVerify)->Arg(4096)->Arg(16384)->Arg(1 << 17)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::crypto::proof
