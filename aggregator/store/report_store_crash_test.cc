// Crash test for the durability invariant of report_store.h: a child process
// writes reports and accumulator snapshots in a loop and is killed with
// SIGKILL at a random moment; the parent reopens the database and checks that
// the stored accumulator equals the sum of exactly the reports marked counted
// and that every acknowledged report survived. After several kill/restart
// cycles a final run completes and must have counted every accepted report
// exactly once.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "aggregator/store/segment_report_store.h"
#include "base/seed_mix.h"
#ifdef TANDEM_WITH_POSTGRES
#include "aggregator/store/postgres_report_store.h"
#include "aggregator/store/testing/postgres_server.h"
#endif
#include "aggregator/store/sqlite_report_store.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;

constexpr int kWords = 16;              // Accumulator length (uint64 words).
// Reports the final run reaches: enough that the killed cycles (each up to
// 8 acknowledgements plus kMaxKillDelayUs of work) do not reach the end on
// a fast machine, where 90 did (a child done before its kill is no kill).
constexpr int64_t kTotalReports = 240;
constexpr int kMaxKillDelayUs = 1000;
constexpr int kKillCycles = 12;
constexpr int64_t kGroup = 3;           // Reports per PutPendingBatch.
constexpr uint64_t kSeed = 0x5eed4;     // Kill-point randomness.
constexpr char kParams[] = "round-1-parameters";

// The store under test: "Sqlite" (a file at `path`) or "Segment" (a
// directory at `path`; small segments, so reclaim runs during the test).
// The Postgres backends of the child's store carry this name, so that the
// parent can wait for them to be gone (WaitForChildBackends).
constexpr char kChildApplicationName[] = "tandem-crash-child";

// `child`: the store the child process opens (Postgres: named
// kChildApplicationName).
absl::StatusOr<std::unique_ptr<ReportStore>> OpenStore(const std::string& kind,
                                                       const std::string& path,
                                                       bool child = false) {
  if (kind == "Segment") {
    SegmentStoreOptions options;
    options.max_segment_bytes = 1024;
    auto s = SegmentReportStore::Open(path, options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ReportStore>(std::move(*s));
  }
#ifdef TANDEM_WITH_POSTGRES
  if (kind == "Postgres") {
    // The test's server (started by the parent before it forks); `path`
    // names the task.
    absl::StatusOr<testing::PostgresServer*> server = testing::PostgresServer::Shared();
    if (!server.ok()) return server.status();
    PostgresStoreOptions options;
    if (child) options.application_name = kChildApplicationName;
    auto s = PostgresReportStore::Open((*server)->conninfo(),
                                       absl::StrCat("crash_", std::hash<std::string>()(path)),
                                       std::move(options));
    if (!s.ok()) return s.status();
    return std::unique_ptr<ReportStore>(std::move(*s));
  }
#endif
  auto s = SqliteReportStore::Open(path);
  if (!s.ok()) return s.status();
  return std::unique_ptr<ReportStore>(std::move(*s));
}

std::string ReportId(int64_t i) { return absl::StrCat("r", i); }
bool Accept(int64_t i) { return i % 5 != 0; }

std::string ShareOf(int64_t i) {
  std::string s(kWords * 8, '\0');
  for (int k = 0; k < kWords; ++k) {
    const uint64_t w = SplitMix64(static_cast<uint64_t>(i) * kWords + k);
    std::memcpy(s.data() + 8 * k, &w, 8);
  }
  return s;
}

using Acc = std::vector<uint64_t>;
void AddShare(Acc& acc, const std::string& share) {
  for (int k = 0; k < kWords; ++k) {
    uint64_t w;
    std::memcpy(&w, share.data() + 8 * k, 8);
    acc[k] += w;
  }
}
std::string Encode(const Acc& acc) {
  return std::string(reinterpret_cast<const char*>(acc.data()), acc.size() * 8);
}
Acc Decode(const std::string& bytes) {
  Acc acc(kWords, 0);
  if (bytes.size() == kWords * 8) std::memcpy(acc.data(), bytes.data(), bytes.size());
  return acc;
}

int64_t IndexOf(const std::string& id) {
  int64_t i = -1;
  if (id.size() < 2 || id[0] != 'r' || !absl::SimpleAtoi(id.substr(1), &i)) return -1;
  return i;
}

void Say(int fd, const std::string& line) {
  const std::string msg = line + "\n";
  if (write(fd, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) _exit(9);
}

// The aggregator's recovery + ingest loop as a daemon would run it. Runs in
// the child; never returns.
[[noreturn]] void ChildMain(const std::string& kind, const std::string& path, int fd) {
  auto opened = OpenStore(kind, path, /*child=*/true);
  if (!opened.ok()) _exit(2);
  ReportStore& store = **opened;
  if (!store.OpenRound(1, kParams).ok()) _exit(3);
  auto snap = store.LoadAccumulator(1);
  if (!snap.ok()) _exit(4);
  Acc acc = Decode(snap->bytes);
  std::vector<std::string> newly;
  // Recovery: accepted-but-uncounted reports are re-accumulated from their
  // stored shares; pending ones are decided now.
  auto uncounted = store.ListReports(1, ReportFilter::kAcceptedUncounted);
  auto pending = store.ListReports(1, ReportFilter::kPending);
  auto all = store.ListReports(1, ReportFilter::kAll);
  if (!uncounted.ok() || !pending.ok() || !all.ok()) _exit(5);
  for (const ReportRecord& r : *uncounted) {
    AddShare(acc, r.share);
    newly.push_back(r.report_id);
  }
  for (const ReportRecord& r : *pending) {
    const int64_t i = IndexOf(r.report_id);
    if (Accept(i)) {
      if (!store.MarkAccepted(r.report_id).ok()) _exit(6);
      AddShare(acc, r.share);
      newly.push_back(r.report_id);
    } else if (!store.MarkRejected(r.report_id).ok()) {
      _exit(6);
    }
  }
  // Resume a group and one more early: a crash may have committed a whole
  // group before acknowledging any of it, and clients retry uploads
  // (PutPending must be idempotent).
  const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(all->size()) - kGroup - 1);
  // Uploads arrive in group commits of up to kGroup (PutPendingBatch).
  std::vector<PendingReport> group;
  for (int64_t i = start; i < kTotalReports; ++i) {
    const std::string id = ReportId(i);
    if (group.empty()) {
      for (int64_t j = i; j < std::min(kTotalReports, i + kGroup); ++j) {
        group.push_back({ReportId(j), ShareOf(j)});
      }
      auto results = store.PutPendingBatch(1, group);
      if (!results.ok()) _exit(7);
      for (size_t k = 0; k < group.size(); ++k) {
        if (!(*results)[k].ok()) _exit(7);
        Say(fd, absl::StrCat("P ", i + static_cast<int64_t>(k)));
      }
    }
    group.erase(group.begin());
    auto rec = store.GetReport(id);
    if (!rec.ok()) _exit(8);
    if (rec->state == ReportState::kPending) {
      // Decided as the aggregator decides a batch between checkpoints.
      const std::vector<std::string> one = {id};
      const bool accept = Accept(i);
      if (!store.CommitDecisions(1, accept ? one : std::vector<std::string>(),
                                 accept ? std::vector<std::string>() : one)
               .ok()) {
        _exit(6);
      }
      if (accept) {
        AddShare(acc, ShareOf(i));
        newly.push_back(id);
      }
    }
    if (newly.size() >= 3) {
      if (!store.SaveAccumulator(1, Encode(acc), newly).ok()) _exit(10);
      newly.clear();
    }
  }
  if (!newly.empty() && !store.SaveAccumulator(1, Encode(acc), newly).ok()) _exit(10);
  Say(fd, "D");
  _exit(0);
}

struct ChildRun {
  std::set<int64_t> acked;  // Reports whose PutPending returned OK.
  bool done = false;
  bool killed = false;
  int exit_code = -1;
};

// Forks a child; kills it `delay_us` microseconds after its `kill_after`-th
// acknowledged report (kill_after 0: never). The delay spreads the kill
// points over the whole write path (the fsyncs of PutPending, CommitDecisions
// and SaveAccumulator), not only just after an acknowledgement.
ChildRun RunChild(const std::string& kind, const std::string& path, int kill_after,
                  int delay_us = 0) {
  ChildRun run;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return run;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ChildMain(kind, path, fds[1]);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char line[64];
  while (fgets(line, sizeof(line), in) != nullptr) {
    if (line[0] == 'D') run.done = true;
    int64_t i = 0;
    if (line[0] == 'P' && absl::SimpleAtoi(absl::StripAsciiWhitespace(line + 2), &i)) {
      run.acked.insert(i);
      if (kill_after > 0 && static_cast<int>(run.acked.size()) == kill_after && !run.killed) {
        if (delay_us > 0) {
          const timespec ts{0, static_cast<long>(delay_us) * 1000};
          nanosleep(&ts, nullptr);
        }
        kill(pid, SIGKILL);  // Lands wherever the child is by now.
        run.killed = true;
      }
    }
  }
  fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

// Postgres: a SIGKILLed child's backend outlives it for a moment and
// finishes what the child had sent (a COMMIT included), so the state the
// child left behind is only final once that backend is gone; checked
// before, the invariant's two reads (LoadAccumulator, then ListReports)
// could straddle that last commit. Waits up to 10 s for every backend named
// kChildApplicationName to exit. Files (SQLite, segments) are final when
// the child is reaped.
void WaitForChildBackends(const std::string& kind) {
#ifdef TANDEM_WITH_POSTGRES
  if (kind != "Postgres") return;
  TANDEM_ASSERT_OK_AND_ASSIGN(testing::PostgresServer * server, testing::PostgresServer::Shared());
  for (int i = 0; i < 1000; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(
        const std::string left,
        server->Query(absl::StrCat("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "application_name = '",
                                   kChildApplicationName, "'")));
    if (left == "0") return;
    const timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  FAIL() << "the killed child's Postgres backend is still there after 10 s";
#endif
}

// Checks the invariant on the file the child left behind.
void CheckInvariant(const std::string& kind, const std::string& path,
                    const std::set<int64_t>& acked) {
  WaitForChildBackends(kind);
  if (::testing::Test::HasFatalFailure()) return;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(kind, path));
  TANDEM_ASSERT_OK_AND_ASSIGN(const AccumulatorSnapshot snap, store->LoadAccumulator(1));
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto counted, store->ListReports(1, ReportFilter::kCounted));
  Acc expected(kWords, 0);
  for (const ReportRecord& r : counted) {
    const int64_t i = IndexOf(r.report_id);
    ASSERT_GE(i, 0) << r.report_id;
    EXPECT_TRUE(Accept(i)) << "rejected report counted: " << r.report_id;
    EXPECT_EQ(r.share_digest, ShareDigest(ShareOf(i)));
    AddShare(expected, ShareOf(i));
  }
  EXPECT_EQ(snap.report_count, static_cast<int64_t>(counted.size()));
  EXPECT_EQ(Decode(snap.bytes), expected) << "accumulator != sum of counted reports";
  for (int64_t i : acked) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord r, store->GetReport(ReportId(i)));
    if (r.state == ReportState::kAccepted) {
      EXPECT_TRUE(Accept(i));
    }
    if (r.state == ReportState::kRejected) {
      EXPECT_FALSE(Accept(i));
    }
  }
  // Every share still needed is readable (validated against its digest).
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto all, store->ListReports(1, ReportFilter::kAll));
  for (const ReportRecord& r : all) {
    if (r.state == ReportState::kPending || (r.state == ReportState::kAccepted && !r.counted)) {
      EXPECT_EQ(r.share, ShareOf(IndexOf(r.report_id))) << r.report_id;
    }
  }
}

class ReportStoreCrashTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReportStoreCrashTest, SigkillNeverLosesOrDoubleCountsReports) {
  SCOPED_TRACE(absl::StrCat("seed ", kSeed));
  const std::string kind = GetParam();
  static int runs = 0;  // a fresh path (a fresh Postgres task) per run, also under --gtest_repeat
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   absl::StrCat("tandem_crash_", getpid(), "_", kind, "_", ++runs);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "aggregator.db").string();
#ifdef TANDEM_WITH_POSTGRES
  // The server belongs to this (parent) process; the children only connect.
  if (kind == "Postgres") ASSERT_THAT(testing::PostgresServer::Shared().status(), IsOk());
#endif

  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<int> kill_point(1, 8);
  std::uniform_int_distribution<int> kill_delay_us(0, kMaxKillDelayUs);
  std::set<int64_t> acked;
  int kills = 0;
  for (int cycle = 0; cycle < kKillCycles; ++cycle) {
    SCOPED_TRACE(absl::StrCat("cycle ", cycle));
    const int after = kill_point(rng);
    const int delay = kill_delay_us(rng);
    const ChildRun run = RunChild(kind, path, after, delay);
    acked.insert(run.acked.begin(), run.acked.end());
    if (run.killed && !run.done) {
      ++kills;
    } else {
      EXPECT_EQ(run.exit_code, 0);
    }
    CheckInvariant(kind, path, acked);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(kills, kKillCycles / 2);

  // Final uninterrupted run: every accepted report counted exactly once.
  const ChildRun last = RunChild(kind, path, 0);
  ASSERT_TRUE(last.done) << "child exit code " << last.exit_code;
  acked.insert(last.acked.begin(), last.acked.end());
  CheckInvariant(kind, path, acked);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(kind, path));
  TANDEM_ASSERT_OK_AND_ASSIGN(const AccumulatorSnapshot snap, store->LoadAccumulator(1));
  Acc expected(kWords, 0);
  int64_t accepted = 0;
  for (int64_t i = 0; i < kTotalReports; ++i) {
    EXPECT_TRUE(acked.count(i)) << i;
    if (Accept(i)) {
      AddShare(expected, ShareOf(i));
      ++accepted;
    }
  }
  EXPECT_EQ(snap.report_count, accepted);
  EXPECT_EQ(Decode(snap.bytes), expected);
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto left, store->ListReports(1, ReportFilter::kAcceptedUncounted));
  EXPECT_TRUE(left.empty());
  TANDEM_ASSERT_OK_AND_ASSIGN(const auto pending, store->ListReports(1, ReportFilter::kPending));
  EXPECT_TRUE(pending.empty());
  store.reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Stores, ReportStoreCrashTest,
                         ::testing::Values("Sqlite", "Segment"
#ifdef TANDEM_WITH_POSTGRES
                                           ,
                                           "Postgres"
#endif
                                           ),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tandem::aggregator
