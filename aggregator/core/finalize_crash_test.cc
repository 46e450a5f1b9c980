// SIGKILL at every store write of Finalize (ARCHITECTURE.md: "a crash
// anywhere in Finalize yields exactly one noise draw"). A child process runs
// a leader and a helper over SQLite, uploads four reports and finalizes
// both; it is killed just before or just after the k-th store write of the
// finalization (the helper's commit of the decisions, the leader's, the
// leader's release with the last reports counted in its transaction
// (ReportStore::CountAndRelease), the helper's). The parent restarts both servers from
// the files with other noise seeds and finalizes again: each server must
// return exactly the draw of whichever process committed its release (the
// child's if the release transaction was durable, else the parent's), the
// same share on every retry, all four reports counted once, and one
// release charged.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/store/sqlite_report_store.h"
#include "aggregator/testing/in_process_peer_channel.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::testing::IsOk;

constexpr int kWritesInFinalize = 4;
constexpr char kDirEnv[] = "TANDEM_FINALIZE_CRASH_DIR";

// Kill point of this process: the k-th write after Arm(), before or after
// it reaches the store (0 = never).
std::atomic<int> g_writes{0};
int g_kill_at = 0;
bool g_kill_after = false;
bool g_armed = false;

void MaybeDie(bool after) {
  if (g_armed && g_kill_at != 0 && g_writes.load() == g_kill_at && after == g_kill_after) {
    kill(getpid(), SIGKILL);
  }
}

// A ReportStore that forwards every call and counts writes (test-only).
class KillingStore : public ReportStore {
 public:
  explicit KillingStore(std::unique_ptr<ReportStore> inner) : inner_(std::move(inner)) {}
  absl::Status OpenRound(int64_t r, absl::string_view p) override {
    return Write([&] { return inner_->OpenRound(r, p); });
  }
  absl::Status CloseRound(int64_t r) override { return Write([&] { return inner_->CloseRound(r); }); }
  absl::Status ReleaseRound(int64_t r, absl::string_view b) override {
    return Write([&] { return inner_->ReleaseRound(r, b); });
  }
  absl::StatusOr<RoundRecord> GetRound(int64_t r) override { return inner_->GetRound(r); }
  absl::StatusOr<std::string> BindRoundSecret(int64_t r, absl::string_view s) override {
    absl::StatusOr<std::string> out;
    absl::Status st = Write([&] {
      out = inner_->BindRoundSecret(r, s);
      return out.status();
    });
    if (!st.ok()) return st;
    return out;
  }
  absl::StatusOr<std::vector<RoundRecord>> ListRounds() override { return inner_->ListRounds(); }
  absl::Status PutPending(int64_t r, absl::string_view id, absl::string_view s) override {
    return Write([&] { return inner_->PutPending(r, id, s); });
  }
  absl::StatusOr<std::vector<absl::Status>> PutPendingBatch(
      int64_t r, absl::Span<const PendingReport> reports) override {
    return inner_->PutPendingBatch(r, reports);  // uploads happen before Arm()
  }
  absl::Status MarkAccepted(absl::string_view id) override {
    return Write([&] { return inner_->MarkAccepted(id); });
  }
  absl::Status MarkRejected(absl::string_view id) override {
    return Write([&] { return inner_->MarkRejected(id); });
  }
  absl::StatusOr<ReportRecord> GetReport(absl::string_view id) override {
    return inner_->GetReport(id);
  }
  absl::StatusOr<ReportCounts> CountReports(int64_t r) override { return inner_->CountReports(r); }
  absl::StatusOr<std::vector<ReportRecord>> ListReports(int64_t r, ReportFilter f) override {
    return inner_->ListReports(r, f);
  }
  absl::Status SaveAccumulator(int64_t r, absl::string_view b,
                               absl::Span<const std::string> ids) override {
    return Write([&] { return inner_->SaveAccumulator(r, b, ids); });
  }
  // One write: the inner store's own transaction.
  absl::Status CountAndRelease(int64_t r, absl::string_view counted,
                               absl::Span<const std::string> ids,
                               absl::string_view released) override {
    return Write([&] { return inner_->CountAndRelease(r, counted, ids, released); });
  }
  absl::Status CommitBatch(int64_t r, absl::string_view b, absl::Span<const std::string> a,
                           absl::Span<const std::string> j) override {
    return Write([&] { return inner_->CommitBatch(r, b, a, j); });
  }
  absl::Status CommitDecisions(int64_t r, absl::Span<const std::string> a,
                               absl::Span<const std::string> j) override {
    return Write([&] { return inner_->CommitDecisions(r, a, j); });
  }
  absl::StatusOr<AccumulatorSnapshot> LoadAccumulator(int64_t r) override {
    return inner_->LoadAccumulator(r);
  }

 private:
  template <typename F>
  absl::Status Write(F fn) {
    if (g_armed) ++g_writes;
    MaybeDie(/*after=*/false);
    absl::Status s = fn();
    MaybeDie(/*after=*/true);
    return s;
  }
  std::unique_ptr<ReportStore> inner_;
};

StoreFactory Killing(const std::string& dir) {
  return [base = MakeSqliteStoreFactory(dir)](absl::string_view task, bool create) mutable
         -> absl::StatusOr<std::unique_ptr<ReportStore>> {
    auto s = base(task, create);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ReportStore>(new KillingStore(*std::move(s)));
  };
}

proto::RoundParameters Params() {
  proto::RoundParameters p = MakeRoundParameters("task", 1, /*log_num_blocks=*/2,
                                                 /*block_size=*/4, /*num_groups=*/2);
  p.set_noise_variance(1e6);
  return p;
}

struct Pair {
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> leader_noise, helper_noise;
  InProcessPeerChannel channel;
  std::unique_ptr<Aggregator> leader, helper;
};

// Both servers over SQLite files in `dir`, with noise seeds `seed` (leader)
// and seed + 1 (helper); `killing` wraps the stores.
std::unique_ptr<Pair> StartPair(const std::string& dir, uint64_t seed, bool killing) {
  auto p = std::make_unique<Pair>();
  p->leader_noise = DeterministicRandom::FromSeed(seed);
  p->helper_noise = DeterministicRandom::FromSeed(seed + 1);
  std::filesystem::create_directories(dir + "/leader");
  std::filesystem::create_directories(dir + "/helper");
  AggregatorOptions o;
  o.policies = testing::PermissiveTestPolicies();
  o.role = Role::kHelper;
  p->helper = Aggregator::Create(o, killing ? Killing(dir + "/helper")
                                            : MakeSqliteStoreFactory(dir + "/helper"),
                                 nullptr, &p->clock, p->helper_noise.get())
                  .value();
  p->channel.set_helper(p->helper.get());
  o.role = Role::kLeader;
  p->leader = Aggregator::Create(o, killing ? Killing(dir + "/leader")
                                            : MakeSqliteStoreFactory(dir + "/leader"),
                                 &p->channel, &p->clock, p->leader_noise.get())
                  .value();
  return p;
}

proto::FinalizeRequest FinalizeRequest() {
  proto::FinalizeRequest req;
  req.set_task_id("task");
  req.set_round_id(1);
  return req;
}

// The child: a whole round, killed at write `k` of the finalization.
void RunChild(const std::string& dir, int k, bool after) {
  std::unique_ptr<Pair> p = StartPair(dir, 11, /*killing=*/true);
  const proto::RoundParameters params = Params();
  if (!p->leader->OpenRound(params).ok() || !p->helper->OpenRound(params).ok()) _exit(3);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto r = MakeReport(params, seed);
    if (!r.ok() || !p->leader->Upload(r->to_leader).ok() || !p->helper->Upload(r->to_helper).ok()) {
      _exit(4);
    }
  }
  g_kill_at = k;
  g_kill_after = after;
  g_armed = true;
  p->leader->Finalize(FinalizeRequest()).IgnoreError();
  p->helper->Finalize(FinalizeRequest()).IgnoreError();
  _exit(5);  // the kill point was never reached
}

struct Shares {
  std::string leader, helper;
};

// Restarts from `dir` with seeds 21/22 and finalizes both twice.
Shares Recover(const std::string& dir, bool* leader_released, bool* helper_released) {
  for (auto [role, released] : {std::pair{"leader", leader_released},
                                std::pair{"helper", helper_released}}) {
    auto store = SqliteReportStore::Open(absl::StrCat(dir, "/", role, "/task-task.sqlite"));
    EXPECT_THAT(store.status(), IsOk());
    *released = store.ok() && (*store)->GetRound(1).ok() &&
                (*store)->GetRound(1)->state == RoundState::kReleased;
  }
  std::unique_ptr<Pair> p = StartPair(dir, 21, /*killing=*/false);
  Shares out;
  auto a = p->leader->Finalize(FinalizeRequest());
  auto b = p->helper->Finalize(FinalizeRequest());
  EXPECT_THAT(a.status(), IsOk());
  EXPECT_THAT(b.status(), IsOk());
  if (!a.ok() || !b.ok()) return out;
  EXPECT_EQ(a->accepted_reports(), 4u);
  EXPECT_EQ(b->accepted_reports(), 4u);
  auto a2 = p->leader->Finalize(FinalizeRequest());
  auto b2 = p->helper->Finalize(FinalizeRequest());
  EXPECT_EQ(a2->aggregate_share().data(), a->aggregate_share().data());
  EXPECT_EQ(b2->aggregate_share().data(), b->aggregate_share().data());
  proto::AggregatorStatusRequest sr;
  sr.set_task_id("task");
  EXPECT_EQ(p->leader->Status(sr)->released_rounds(), 1u);
  EXPECT_EQ(p->helper->Status(sr)->released_rounds(), 1u);
  return {a->aggregate_share().data(), b->aggregate_share().data()};
}

// The draws of an uninterrupted round with the child's and the parent's seeds.
Shares Reference(const std::string& dir, uint64_t seed) {
  std::unique_ptr<Pair> p = StartPair(dir, seed, /*killing=*/false);
  const proto::RoundParameters params = Params();
  EXPECT_THAT(p->leader->OpenRound(params), IsOk());
  EXPECT_THAT(p->helper->OpenRound(params), IsOk());
  for (uint64_t s = 1; s <= 4; ++s) {
    auto r = MakeReport(params, s);
    EXPECT_THAT(p->leader->Upload(r->to_leader), IsOk());
    EXPECT_THAT(p->helper->Upload(r->to_helper), IsOk());
  }
  auto a = p->leader->Finalize(FinalizeRequest());
  auto b = p->helper->Finalize(FinalizeRequest());
  return {a->aggregate_share().data(), b->aggregate_share().data()};
}

TEST(FinalizeCrashTest, SigkillAtEveryStepYieldsExactlyOneNoiseDraw) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes this binary
  const char* env = getenv(kDirEnv);
  std::string dir;
  if (env != nullptr) {
    dir = env;
  } else {
    char tmpl[] = "/tmp/tandem-finalize-crash-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    setenv(kDirEnv, dir.c_str(), 1);
  }
  for (int k = 1; k <= kWritesInFinalize; ++k) {
    for (bool after : {false, true}) {
      const std::string d = absl::StrCat(dir, "/k", k, after ? "-after" : "-before");
      EXPECT_EXIT(RunChild(d, k, after), ::testing::KilledBySignal(SIGKILL), "");
    }
  }
  const Shares child = Reference(dir + "/reference-child", 11);
  const Shares parent = Reference(dir + "/reference-parent", 21);
  ASSERT_NE(child.leader, parent.leader);  // the seeds give different draws
  int leader_kept = 0, helper_kept = 0;
  for (int k = 1; k <= kWritesInFinalize; ++k) {
    for (bool after : {false, true}) {
      SCOPED_TRACE(absl::StrCat("write ", k, after ? " done" : " not done"));
      bool leader_released = false, helper_released = false;
      const Shares got =
          Recover(absl::StrCat(dir, "/k", k, after ? "-after" : "-before"), &leader_released,
                  &helper_released);
      EXPECT_EQ(got.leader, leader_released ? child.leader : parent.leader);
      EXPECT_EQ(got.helper, helper_released ? child.helper : parent.helper);
      leader_kept += leader_released;
      helper_kept += helper_released;
    }
  }
  // The leader's release is write 3, the helper's write 4: killed after
  // them (and, for the leader, anywhere later) the child's draw survives.
  EXPECT_EQ(leader_kept, 3);
  EXPECT_EQ(helper_kept, 1);
  unsetenv(kDirEnv);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::aggregator
