// Sustained ingest of the whole two-server system on this machine: a leader
// and a helper in one process (both on the same 2 cores, so this is the
// system rate, not one server's), stores on local disk (see args), real DPF
// reports.
//   BM_PairIngest: per iteration, 32 uploads to each server, then the
//     leader's verification pass (digests on both sides, exchange, one
//     expansion per report, commit; accumulator checkpoints every
//     AggregatorOptions::checkpoint_reports accepted reports).
//   BM_PairIngestPipelined: as the daemons run it: uploader threads keep
//     uploading (at most 512 reports ahead of the verification) while the
//     main thread runs verification passes (ProcessPending) back to back;
//     items = reports decided. Upload fsync waits overlap the expansions.
//     cpu_us_per_report: CPU of the whole process per report decided.
//   BM_PairComputeBound: the expansions alone (both servers' shares of 32
//     reports, into accumulators, digests included), the rate the two
//     servers' compute allows on these cores: the reference for both above.
//   build/aggregator/core/aggregator_pair_benchmark
//   args: log2 D, synchronous (1 = FULL fsync per commit, 0 = NORMAL),
//         store (0 = SQLite with shares as blobs, 1 = segment store: shares
//         and accumulator snapshots in append-only segment files, SQLite as
//         the index, 2 = in memory: no durability, the ceiling that storage
//         leaves to the rest of the system, 3 = PostgreSQL: one throwaway
//         local server (aggregator/store/testing/postgres_server.h), one
//         database per server, synchronous_commit on with full = 1 and off
//         with full = 0), uploaders (concurrent clients:
//         the group-commit width), norm (1 = a norm-bound round: every
//         report carries a norm proof, checked by both servers)
// Counters: expansions_per_report = share + undo expansions of both
// servers / reports / 2 (1.0 = one expansion per report per server);
// checkpoints = accumulator snapshots per server; store_reads_per_report =
// shares verification and commits read back from the stores, per report
// and server (0 when the upload cache, share_cache.h, held them all).
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/postgres_store_factory.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/store/in_memory_report_store.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/large_buffers.h"
#include "base/random.h"
#include "crypto/dpf/sparse_dpf.h"
#ifdef TANDEM_WITH_POSTGRES
#include "aggregator/store/testing/postgres_server.h"
#endif

namespace tandem::aggregator {
namespace {

sqlite::DatabaseOptions Sync(bool full) {
  sqlite::DatabaseOptions o;
  o.synchronous = full ? sqlite::Synchronous::kFull : sqlite::Synchronous::kNormal;
  return o;
}

constexpr int kPerIteration = 32;

// A fresh database on the benchmark's shared PostgreSQL server for each
// server of each Pair; an empty string (and a skipped benchmark) without one.
std::string PostgresDatabase(benchmark::State& state, bool full) {
#ifdef TANDEM_WITH_POSTGRES
  static int databases = 0;
  auto server = testing::PostgresServer::Shared();
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return "";
  }
  auto conninfo = (*server)->CreateDatabase(absl::StrCat("pair_", ++databases));
  if (!conninfo.ok()) {
    state.SkipWithError(std::string(conninfo.status().message()).c_str());
    return "";
  }
  return full ? *conninfo : absl::StrCat(*conninfo, " options='-c synchronous_commit=off'");
#else
  (void)full;
  state.SkipWithError("built without PostgreSQL");
  return "";
#endif
}

// A leader and a helper over the stores of the benchmark's args, with the
// round open and a pool of kPerIteration reports (their key shares reused
// under fresh ids: ids are labels, not inputs).
struct Pair {
  std::string dir;
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> noise = DeterministicRandom::FromSeed(1);
  InProcessPeerChannel channel;
  std::unique_ptr<Aggregator> leader, helper;
  proto::RoundParameters params;
  std::vector<testing::TestReport> pool;
  std::atomic<uint64_t> next_id{0};

  ~Pair() {
    leader.reset();
    helper.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  // Each pool report's two requests as they travel (wire[2i] to the
  // leader, wire[2i + 1] to the helper), parsed per upload as a gRPC
  // server parses each call's request.
  std::vector<std::string> wire;
  // Uploads pool[i % pool.size()] under a fresh id to both servers: parses
  // the two requests (never copies the report's dense vector, 8 MiB at
  // D = 2^20), as the daemon's upload service does.
  bool UploadOne(size_t i) {
    const size_t r = i % pool.size();
    std::string id(16, '\0');
    const uint64_t n = ++next_id;
    std::memcpy(id.data(), &n, sizeof(n));
    for (int party = 0; party < 2; ++party) {
      // Onto an arena of its own, which the cache keeps, as the daemon's
      // service parses (Upload(request, arena)).
      auto [arena, request] = Aggregator::NewArenaUpload();
      if (!request->ParseFromString(wire[2 * r + party])) return false;
      request->set_report_id(id);
      if (!(party == 0 ? leader : helper)->Upload(request, arena).ok()) return false;
    }
    return true;
  }
  // Counters of both servers' Status.
  void Report(benchmark::State& state, double reports) {
    double expansions = 0, checkpoints = 0, stored_reads = 0, cached_reads = 0;
    proto::AggregatorStatusRequest sreq;
    sreq.set_task_id("bench");
    for (Aggregator* a : {leader.get(), helper.get()}) {
      auto st = a->Status(sreq);
      if (!st.ok()) continue;
      expansions += static_cast<double>(st->share_expansions() + st->undo_expansions());
      checkpoints += static_cast<double>(st->accumulator_checkpoints());
      stored_reads += static_cast<double>(st->stored_share_reads());
      cached_reads += static_cast<double>(st->cached_share_reads());
    }
    state.counters["D"] = static_cast<double>(params.dimension());
    // Bytes one server receives per report (the upload request).
    state.counters["upload_bytes"] = static_cast<double>(pool[0].to_leader.ByteSizeLong());
    state.counters["expansions_per_report"] = expansions / 2 / reports;
    state.counters["checkpoints"] = checkpoints / 2;
    // Shares read back from the stores per report and server (the rest
    // came from the upload cache, share_cache.h).
    state.counters["store_reads_per_report"] = stored_reads / 2 / reports;
    state.counters["cache_reads_per_report"] = cached_reads / 2 / reports;
  }
};

// User plus system CPU seconds of this process so far.
double ProcessCpuSeconds() {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  const auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

std::unique_ptr<Pair> MakePair(benchmark::State& state) {
  // As tandem-aggregator's main does (base/large_buffers.h); TANDEM_MALLOC=
  // default measures glibc's own thresholds.
  if (const char* m = getenv("TANDEM_MALLOC"); m == nullptr || std::string(m) != "default") {
    TuneAllocatorForLargeBuffers();
  }
  auto p = std::make_unique<Pair>();
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  const bool full = state.range(1) != 0;
  const int64_t store_kind = state.range(2);
  const bool norm = state.range(4) != 0;
  const auto factory = [&](const std::string& d) -> StoreFactory {
    if (store_kind == 3) return MakePostgresStoreFactory(PostgresDatabase(state, full));
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
    return nullptr;
  }
  p->dir = tmpl;
  std::filesystem::create_directories(p->dir + "/l");
  std::filesystem::create_directories(p->dir + "/h");
  AggregatorOptions ho;
  ho.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  ho.role = Role::kHelper;
  p->helper = *Aggregator::Create(ho, factory(p->dir + "/h"), nullptr, &p->clock, p->noise.get());
  p->channel.set_helper(p->helper.get());
  AggregatorOptions lo;
  lo.policies = ::tandem::aggregator::testing::PermissiveTestPolicies();
  if (const char* b = getenv("TANDEM_VERIFY_BATCH"); b != nullptr) lo.verify_batch_size = atoi(b);
  p->leader =
      *Aggregator::Create(lo, factory(p->dir + "/l"), &p->channel, &p->clock, p->noise.get());
  // B = 2^10, k = 16; norm rounds bound every block and the report.
  p->params = norm ? testing::MakeNormRoundParameters("bench", 1, log_d - 14, 1024, 16, 1 << 14,
                                                      1 << 16)
                   : testing::MakeRoundParameters("bench", 1, log_d - 14, 1024, 16);
  if (!p->leader->OpenRound(p->params).ok() || !p->helper->OpenRound(p->params).ok()) {
    state.SkipWithError("open");
    return nullptr;
  }
  for (int i = 0; i < kPerIteration; ++i) {
    p->pool.push_back(*testing::MakeReport(p->params, 500 + static_cast<uint64_t>(i)));
    p->wire.push_back(p->pool.back().to_leader.SerializeAsString());
    p->wire.push_back(p->pool.back().to_helper.SerializeAsString());
  }
  return p;
}

void BM_PairIngest(benchmark::State& state) {
  std::unique_ptr<Pair> p = MakePair(state);
  if (p == nullptr) return;
  const int uploaders_n = static_cast<int>(state.range(3));  // concurrent clients
  double upload_s = 0, process_s = 0;  // Wall time of the two phases.
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<int> failures{0};
    std::vector<std::thread> uploaders;
    for (int t = 0; t < uploaders_n; ++t) {
      uploaders.emplace_back([&, t] {
        for (int i = t; i < kPerIteration; i += uploaders_n) {
          if (!p->UploadOne(static_cast<size_t>(i))) ++failures;
        }
      });
    }
    for (std::thread& t : uploaders) t.join();
    if (failures > 0) state.SkipWithError("upload");
    const auto t1 = std::chrono::steady_clock::now();
    auto decided = p->leader->ProcessPending("bench");
    const auto t2 = std::chrono::steady_clock::now();
    upload_s += std::chrono::duration<double>(t1 - t0).count();
    process_s += std::chrono::duration<double>(t2 - t1).count();
    if (!decided.ok() || *decided != kPerIteration) state.SkipWithError("process");
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  // Per-iteration milliseconds of the upload and the verification phases.
  state.counters["upload_ms"] = 1e3 * upload_s / static_cast<double>(state.iterations());
  state.counters["process_ms"] = 1e3 * process_s / static_cast<double>(state.iterations());
  p->Report(state, static_cast<double>(state.iterations() * kPerIteration));
}

void BM_PairIngestPipelined(benchmark::State& state) {
  std::unique_ptr<Pair> p = MakePair(state);
  if (p == nullptr) return;
  const int uploaders_n = static_cast<int>(state.range(3));
  constexpr int64_t kAhead = 512;  // uploads ahead of the verification, at most
  // Backpressure without polling (a daemon's clients would block in gRPC):
  // an uploader waits while kAhead reports are started and undecided, the
  // verification loop while every stored report is decided.
  std::mutex mu;
  std::condition_variable cv;
  int64_t started = 0, stored = 0, decided = 0;  // guarded by mu
  bool stop = false;
  std::atomic<bool> failed{false};
  std::vector<std::thread> uploaders;
  for (int t = 0; t < uploaders_n; ++t) {
    uploaders.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t);; i += static_cast<size_t>(uploaders_n)) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || started - decided < kAhead; });
          if (stop) return;
          ++started;
        }
        if (!p->UploadOne(i)) failed = true;
        {
          std::lock_guard<std::mutex> lock(mu);
          ++stored;
        }
        cv.notify_all();
      }
    });
  }
  // One verification pass over whatever is pending (batches of up to 64),
  // once something is.
  const auto pass = [&]() -> absl::StatusOr<int> {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stored > decided; });
    }
    // A daemon's passes are 100 ms apart: reports whose helper share was
    // still on its way at a pass wait out their backoff (issue 34 item 5) on
    // this clock, which only this advances.
    p->clock.Advance(absl::Milliseconds(100));
    absl::StatusOr<int> n = p->leader->ProcessPending("bench");
    if (n.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        decided += *n;
      }
      cv.notify_all();
    }
    return n;
  };
  // Untimed warm-up: two windows of reports through both servers first, so
  // that the figures are a running daemon's: the first touches of the
  // window's buffers (allocator and page cache: 512 reports in flight are
  // ~0.3 GB of shares and copies) are not counted. Without it a 3 s run at
  // D = 2^20 spent ~10 % of its samples in those page faults.
  bool ok = true;
  for (int64_t warm = 0; ok && warm < 2 * kAhead;) {
    absl::StatusOr<int> n = pass();
    ok = n.ok();
    if (ok) warm += *n;
  }
  int64_t in_loop = 0;
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    absl::StatusOr<int> n = ok ? pass() : absl::InternalError("warm-up failed");
    if (!n.ok()) {
      state.SkipWithError("process");
      break;
    }
    in_loop += *n;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (std::thread& t : uploaders) t.join();
  if (failed) state.SkipWithError("upload");
  // CPU of the whole process (both servers and the uploaders) per report
  // decided in the timed loop: the cost figure, steadier than the rate when
  // another job shares the cores.
  state.counters["cpu_us_per_report"] =
      (ProcessCpuSeconds() - cpu_start) * 1e6 / static_cast<double>(std::max<int64_t>(1, in_loop));
  state.SetItemsProcessed(in_loop);
  p->Report(state, static_cast<double>(std::max<int64_t>(1, decided)));
}

void BM_PairComputeBound(benchmark::State& state) {
  std::unique_ptr<Pair> p = MakePair(state);
  if (p == nullptr) return;
  auto leader_dpf = crypto::SparseDpf::Create(p->params.dimension(), 1024, 16, 64);
  if (!leader_dpf.ok()) {
    state.SkipWithError("dpf");
    return;
  }
  std::vector<const proto::SparseKeySet*> l, h;
  for (const testing::TestReport& r : p->pool) {
    l.push_back(&r.to_leader.key_share());
    h.push_back(&r.to_helper.key_share());
  }
  std::vector<uint64_t> acc_l(p->params.dimension()), acc_h(p->params.dimension());
  for (auto _ : state) {
    // Both servers' one expansion per report (with its digest); norm-proof
    // rounds add the verifier inputs, which this bound leaves out.
    if (!ComputeDigests(*leader_dpf, l, absl::MakeSpan(acc_l)).ok() ||
        !ComputeDigests(*leader_dpf, h, absl::MakeSpan(acc_h)).ok()) {
      state.SkipWithError("expand");
    }
    benchmark::DoNotOptimize(acc_l.data());
    benchmark::DoNotOptimize(acc_h.data());
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  state.counters["D"] = static_cast<double>(p->params.dimension());
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
    ->Args({17, 1, 3, 8, 0})
    ->Args({20, 1, 3, 8, 0})
    ->Args({17, 0, 3, 8, 0})
    ->Args({20, 0, 3, 8, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PairIngestPipelined)
    ->ArgNames({"log2D", "full", "store", "uploaders", "norm"})
    ->Args({15, 1, 1, 64, 0})
    ->Args({17, 1, 1, 64, 0})
    ->Args({20, 1, 1, 64, 0})
    ->Args({17, 0, 2, 64, 0})
    ->Args({20, 0, 2, 64, 0})
    ->Args({17, 1, 1, 8, 0})
    ->Args({17, 1, 0, 8, 0})
    ->Args({17, 0, 2, 8, 0})
    ->Args({20, 1, 1, 8, 0})
    ->Args({20, 1, 0, 8, 0})
    ->Args({20, 0, 1, 8, 0})
    ->Args({20, 0, 2, 8, 0})
    ->Args({20, 1, 1, 8, 1})
    ->Args({17, 1, 3, 64, 0})
    ->Args({20, 1, 3, 64, 0})
    ->Args({17, 0, 1, 64, 0})
    ->Args({20, 0, 1, 64, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PairComputeBound)
    ->ArgNames({"log2D", "full", "store", "uploaders", "norm"})
    ->Args({15, 0, 2, 8, 0})
    ->Args({17, 0, 2, 8, 0})
    ->Args({20, 0, 2, 8, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tandem::aggregator
