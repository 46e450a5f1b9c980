// Client-side cost of one report: ReportEncoder::Encode (clip, fixed point,
// block sampling, PREAMBLE key shares, norm proofs when the round has a
// bound, serialization of both requests) of a D-float update, as an app
// calls it (public API, OpenSSL randomness). The C++ side of
// bench/python_encode_bench.py, which times the same call from Python.
//   build/client/client_encoder_benchmark --benchmark_filter=BM_Encode
// Args: log2(D), block size B, log2(blocks per group) d, norm proofs (0/1).
// The round is the one tandem-coordinator announces for a model of D
// parameters (server/core/secure_sum.cc: k = D / (2^d B) groups).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "crypto/proof/norm_proof.h"
#include "proto/aggregator.pb.h"
#include "tandem/client/report_encoder.h"

namespace tandem::client {
namespace {

std::string RoundParametersFor(uint64_t dimension, uint32_t block_size, uint32_t log_blocks,
                               bool proofs) {
  const uint32_t groups = static_cast<uint32_t>(dimension / (uint64_t{block_size} << log_blocks));
  proto::RoundParameters p;
  p.set_task_id("bench");
  p.set_round_id(1);
  p.set_dimension(dimension);
  p.mutable_group_parameters()->set_log_num_blocks(log_blocks);
  p.mutable_group_parameters()->set_block_size(block_size);
  p.mutable_group_parameters()->set_value_bits(64);
  p.set_num_groups(groups);
  p.set_max_reports(1000);
  p.mutable_fixed_point()->set_fractional_bits(16);
  p.mutable_fixed_point()->set_clip_l2_norm(1.0);
  if (proofs) {
    const uint64_t bound =
        crypto::proof::L2SquaredBoundForClip(1.0, 16, static_cast<uint64_t>(groups) * block_size);
    p.mutable_norm_bound()->set_max_l2_squared(bound);
    p.mutable_norm_bound()->set_max_block_l2_squared(bound);
  }
  return p.SerializeAsString();
}

// Each iteration encodes one report; with `keep_previous` the previous
// report is still alive while the next is encoded (as in an app loop
// `report = Encode(update)`), which changes glibc's heap reuse.
void Encode(benchmark::State& state, bool keep_previous) {
  const uint64_t dimension = uint64_t{1} << state.range(0);
  auto encoder = ReportEncoder::CreateForRound(
      RoundParametersFor(dimension, static_cast<uint32_t>(state.range(1)),
                         static_cast<uint32_t>(state.range(2)), state.range(3) != 0));
  if (!encoder.ok()) {
    state.SkipWithError(std::string(encoder.status().message()).c_str());
    return;
  }
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.f, 1e-3f);
  std::vector<float> update(dimension);
  for (float& x : update) x = normal(gen);
  uint64_t bytes = 0;
  absl::StatusOr<EncodedReport> previous;
  for (auto _ : state) {
    auto report = (*encoder)->Encode(update);
    if (!report.ok()) {
      state.SkipWithError(std::string(report.status().message()).c_str());
      return;
    }
    bytes = report->to_leader.size() + report->to_helper.size();
    benchmark::DoNotOptimize(report->to_leader.data());
    if (keep_previous) previous = std::move(report);
  }
  state.counters["upload_bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(dimension));
}

void BM_Encode(benchmark::State& state) { Encode(state, false); }
void BM_EncodeKeepPrevious(benchmark::State& state) { Encode(state, true); }

BENCHMARK(BM_EncodeKeepPrevious)
    ->ArgNames({"log2D", "B", "d", "proofs"})
    ->Args({16, 256, 1, 0})
    ->Args({20, 256, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Encode)
    ->ArgNames({"log2D", "B", "d", "proofs"})
    ->Args({16, 256, 1, 0})
    ->Args({20, 256, 1, 0})
    ->Args({16, 256, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tandem::client
