// Sustained ingest of one aggregation server: per report, validation of the
// upload, the VDPF digest for the verification exchange and the expansion
// into the accumulator, on all cores (oneTBB). The leader and the helper do
// the same work, so this is the per-server rate a deployment sees; the
// physical bound is the AES work of the expansion (bench/README.md).
//   build/aggregator/core/aggregator_benchmark --benchmark_filter=Ingest
#include <benchmark/benchmark.h>

#include <vector>

#include "aggregator/core/expansion.h"
#include "aggregator/testing/report_factory.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"

namespace tandem::aggregator {
namespace {

// D = k * 2^d * B with B = 2^10, k = 16.
void BM_Ingest(benchmark::State& state) {
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  const uint32_t block = 1024, groups = 16;
  const uint32_t log_blocks = log_d - 10 - 4;
  proto::RoundParameters params =
      testing::MakeRoundParameters("bench", 1, log_blocks, block, groups);
  auto dpf = crypto::SparseDpf::Create(params.dimension(), block, groups, 64);
  if (!dpf.ok()) {
    state.SkipWithError("dpf");
    return;
  }
  constexpr int kReports = 16;
  std::vector<proto::SparseKeySet> shares;
  for (int i = 0; i < kReports; ++i) {
    auto r = testing::MakeReport(params, 1000 + i);
    if (!r.ok()) {
      state.SkipWithError("report");
      return;
    }
    shares.push_back(r->to_leader.key_share());
  }
  std::vector<const proto::SparseKeySet*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  const crypto::ExpectedKeySetShape shape = dpf->Shape(0);
  std::vector<uint64_t> acc(params.dimension(), 0);
  for (auto _ : state) {
    for (const auto& s : shares) {
      if (!crypto::ValidateSparseKeySet(s, shape).ok()) state.SkipWithError("validate");
    }
    auto digests = ComputeDigests(*dpf, ptrs);
    auto added = AccumulateShares(*dpf, ptrs, absl::MakeSpan(acc));
    if (!digests.ok() || !added.ok()) state.SkipWithError("expand");
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * kReports);
  state.counters["D"] = static_cast<double>(params.dimension());
  state.counters["upload_bytes"] = static_cast<double>(shares[0].ByteSizeLong());
}
BENCHMARK(BM_Ingest)->Arg(17)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tandem::aggregator
