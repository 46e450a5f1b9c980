// Sustained ingest of the whole two-server system on this machine: a leader
// and a helper in one process (both on the same 2 cores, so this is the
// system rate, not one server's), stores on local disk (see args), real DPF
// reports. Per iteration: 32 uploads to each server, then the leader's
// verification pass (digests on both sides, exchange, expansion, one
// accumulator snapshot per batch of 64).
//   build/aggregator/core/aggregator_pair_benchmark
//   args: log2 D, synchronous (1 = FULL fsync per commit, 0 = NORMAL),
//         store (0 = SQLite with shares as blobs, 1 = segment store: shares
//         and accumulator snapshots in append-only segment files, SQLite as
//         the index, 2 = in memory: no durability, the ceiling that storage
//         leaves to the rest of the system), uploaders (concurrent clients:
//         the group-commit width), norm (1 = a norm-bound round: every
//         report carries a norm proof, checked by both servers)
// Counters: expansions_per_report = share + undo expansions of both
// servers / reports / 2 (1.0 = one expansion per report per server).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/store/in_memory_report_store.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"

namespace tandem::aggregator {
namespace {

sqlite::DatabaseOptions Sync(bool full) {
  sqlite::DatabaseOptions o;
  o.synchronous = full ? sqlite::Synchronous::kFull : sqlite::Synchronous::kNormal;
  return o;
}

void BM_PairIngest(benchmark::State& state) {
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  const bool full = state.range(1) != 0;
  const int64_t store_kind = state.range(2);
  const auto factory = [&](const std::string& d) -> StoreFactory {
    if (store_kind == 2) {
      return [](absl::string_view, bool) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
        return std::make_unique<InMemoryReportStore>();
      };
    }
    return store_kind == 1 ? MakeSegmentStoreFactory(d, Sync(full))
                           : MakeSqliteStoreFactory(d, Sync(full));
  };
  char tmpl[] = "/tmp/tandem-pairbench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    state.SkipWithError("mkdtemp");
    return;
  }
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/l");
  std::filesystem::create_directories(dir + "/h");
  FakeClock clock;
  auto noise = DeterministicRandom::FromSeed(1);
  InProcessPeerChannel channel;
  AggregatorOptions ho;
  ho.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  ho.role = Role::kHelper;
  auto helper = Aggregator::Create(ho, factory(dir + "/h"), nullptr, &clock, noise.get());
  channel.set_helper(helper->get());
  AggregatorOptions lo;
  lo.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  auto leader = Aggregator::Create(lo, factory(dir + "/l"), &channel, &clock, noise.get());
  const int uploaders_arg = static_cast<int>(state.range(3));
  const bool norm = state.range(4) != 0;
  // B = 2^10, k = 16; norm rounds bound every block and the report.
  proto::RoundParameters params =
      norm ? testing::MakeNormRoundParameters("bench", 1, log_d - 14, 1024, 16, 1 << 14, 1 << 16)
           : testing::MakeRoundParameters("bench", 1, log_d - 14, 1024, 16);
  if (!(*leader)->OpenRound(params).ok() || !(*helper)->OpenRound(params).ok()) {
    state.SkipWithError("open");
    return;
  }
  constexpr int kPerIteration = 32;
  std::vector<testing::TestReport> pool;
  for (int i = 0; i < kPerIteration; ++i) pool.push_back(*testing::MakeReport(params, 500 + i));
  uint64_t next_id = 0;
  const int kUploaders = uploaders_arg;  // concurrent clients, as on a gRPC server
  double upload_s = 0, process_s = 0;  // Wall time of the two phases.
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (testing::TestReport& r : pool) {
      // Same key shares under a fresh report id: ids are labels, not inputs.
      std::string id(16, '\0');
      ++next_id;
      std::memcpy(id.data(), &next_id, sizeof(next_id));
      r.to_leader.set_report_id(id);
      r.to_helper.set_report_id(id);
    }
    std::atomic<int> failures{0};
    std::vector<std::thread> uploaders;
    for (int t = 0; t < kUploaders; ++t) {
      uploaders.emplace_back([&, t] {
        for (int i = t; i < kPerIteration; i += kUploaders) {
          if (!(*leader)->Upload(pool[i].to_leader).ok() ||
              !(*helper)->Upload(pool[i].to_helper).ok()) {
            ++failures;
          }
        }
      });
    }
    for (std::thread& t : uploaders) t.join();
    if (failures > 0) state.SkipWithError("upload");
    const auto t1 = std::chrono::steady_clock::now();
    auto decided = (*leader)->ProcessPending("bench");
    const auto t2 = std::chrono::steady_clock::now();
    upload_s += std::chrono::duration<double>(t1 - t0).count();
    process_s += std::chrono::duration<double>(t2 - t1).count();
    if (!decided.ok() || *decided != kPerIteration) state.SkipWithError("process");
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  state.counters["D"] = static_cast<double>(params.dimension());
  // Per-iteration milliseconds of the upload and the verification phases.
  state.counters["upload_ms"] = 1e3 * upload_s / static_cast<double>(state.iterations());
  state.counters["process_ms"] = 1e3 * process_s / static_cast<double>(state.iterations());
  double expansions = 0;
  proto::AggregatorStatusRequest sreq;
  sreq.set_task_id("bench");
  for (Aggregator* a : {leader->get(), helper->get()}) {
    auto st = a->Status(sreq);
    if (st.ok()) expansions += static_cast<double>(st->share_expansions() + st->undo_expansions());
  }
  state.counters["expansions_per_report"] =
      expansions / 2 / static_cast<double>(state.iterations() * kPerIteration);
  leader->reset();
  helper->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_PairIngest)
    ->ArgNames({"log2D", "full", "store", "uploaders", "norm"})
    ->Args({17, 1, 0, 8, 0})
    ->Args({17, 0, 0, 8, 0})
    ->Args({20, 1, 0, 8, 0})
    ->Args({20, 0, 0, 8, 0})
    ->Args({17, 1, 1, 8, 0})
    ->Args({17, 0, 1, 8, 0})
    ->Args({20, 1, 1, 8, 0})
    ->Args({20, 0, 1, 8, 0})
    ->Args({17, 0, 2, 8, 0})
    ->Args({20, 0, 2, 8, 0})
    ->Args({17, 1, 1, 32, 0})
    ->Args({20, 1, 1, 32, 0})
    ->Args({20, 1, 1, 8, 1})
    ->Args({20, 0, 2, 8, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tandem::aggregator
