// SQLite report store: commit latency under synchronous=FULL (fsync per
// commit) versus NORMAL, and the report rate one connection sustains; a
// round's release on the SQLite and segment stores.
//   build-dp/aggregator/aggregator_store_benchmark
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/store/segment_report_store.h"
#include "aggregator/store/sqlite_report_store.h"
#include "benchmark/benchmark.h"

namespace tandem::aggregator {
namespace {

std::string TempPath(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / absl::StrCat("tandem_bench_", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (tag + ".db")).string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

// One PutPending (one committed transaction) per iteration; arg 0 = share
// bytes, arg 1 = synchronous (2 FULL, 1 NORMAL).
void BM_PutPending(benchmark::State& state) {
  sqlite::DatabaseOptions o;
  o.synchronous = static_cast<sqlite::Synchronous>(state.range(1));
  auto store = SqliteReportStore::Open(TempPath(absl::StrCat("put", state.range(0), state.range(1))), o);
  if (!store.ok() || !(*store)->OpenRound(1, "p").ok()) {
    state.SkipWithError("open failed");
    return;
  }
  const std::string share(static_cast<size_t>(state.range(0)), '\x42');
  int64_t i = 0;
  for (auto _ : state) {
    if (!(*store)->PutPending(1, absl::StrCat("r", i++), share).ok()) state.SkipWithError("put failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PutPending)
    ->Args({1024, 2})->Args({1024, 1})->Args({1 << 20, 2})->Args({1 << 20, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// The full per-report path of the crash test's daemon: PutPending,
// MarkAccepted, and a SaveAccumulator (D = 2^16 words) every `arg` reports.
void BM_ReportLifecycle(benchmark::State& state) {
  auto store = SqliteReportStore::Open(TempPath(absl::StrCat("life", state.range(0))));
  if (!store.ok() || !(*store)->OpenRound(1, "p").ok()) {
    state.SkipWithError("open failed");
    return;
  }
  const std::string share(1024, '\x42');
  const std::string acc(8 << 16, '\0');
  std::vector<std::string> newly;
  int64_t i = 0;
  for (auto _ : state) {
    const std::string id = absl::StrCat("r", i++);
    if (!(*store)->PutPending(1, id, share).ok() || !(*store)->MarkAccepted(id).ok()) {
      state.SkipWithError("write failed");
    }
    newly.push_back(id);
    if (static_cast<int64_t>(newly.size()) >= state.range(0)) {
      if (!(*store)->SaveAccumulator(1, acc, newly).ok()) state.SkipWithError("save failed");
      newly.clear();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReportLifecycle)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A round's release as the aggregator makes it at the main job's DP
// settings (D = 25,450 words, the round's last 100 reports decided but not
// counted yet): arg 0 = store (0 SQLite, 1 segments; both with an fsync per
// commit), arg 1 = 0 for SaveAccumulator then ReleaseRound (two
// transactions, as before CountAndRelease), 1 for CountAndRelease (one).
void BM_Release(benchmark::State& state) {
  const std::string path = TempPath(absl::StrCat("release", state.range(0), state.range(1)));
  std::filesystem::remove_all(path + ".seg");
  absl::StatusOr<std::unique_ptr<ReportStore>> store;
  if (state.range(0) == 0) {
    store = SqliteReportStore::Open(path);
  } else {
    store = SegmentReportStore::Open(path + ".seg");
  }
  if (!store.ok()) {
    state.SkipWithError("open failed");
    return;
  }
  const std::string share(1024, '\x42');
  const std::string acc(8 * 25450, '\x01');
  const std::string noised(8 * 25450, '\x02');
  int64_t round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ++round;
    std::vector<std::string> ids;
    bool ok = (*store)->OpenRound(round, "p").ok();
    for (int i = 0; i < 100 && ok; ++i) {
      ids.push_back(absl::StrCat("r", round, "-", i));
      ok = (*store)->PutPending(round, ids.back(), share).ok();
    }
    ok = ok && (*store)->CommitDecisions(round, ids, {}).ok();
    state.ResumeTiming();
    if (state.range(1) == 0) {
      ok = ok && (*store)->SaveAccumulator(round, acc, ids).ok() &&
           (*store)->ReleaseRound(round, noised).ok();
    } else {
      ok = ok && (*store)->CountAndRelease(round, acc, ids, noised).ok();
    }
    if (!ok) {
      state.SkipWithError("release failed");
      return;
    }
  }
}
BENCHMARK(BM_Release)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tandem::aggregator
