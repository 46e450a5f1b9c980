// Accumulator checkpoints (AggregatorOptions::checkpoint_reports, commit.cc):
// between checkpoints a batch stores only its decisions, accepted reports
// keep their shares, and a restart re-expands exactly those; nothing is lost
// or counted twice. Run over both durable stores.
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/core/aggregator.h"
#include "aggregator/core/sqlite_store_factory.h"
#include "aggregator/store/segment_report_store.h"
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

using ::tandem::aggregator::testing::AddInto;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::aggregator::testing::TestReport;
using ::tandem::testing::IsOk;

class CheckpointTest : public ::testing::TestWithParam<bool /*segment store*/> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-checkpoint-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    params_ = MakeRoundParameters("task", 1, /*log_num_blocks=*/3, /*block_size=*/8,
                                  /*num_groups=*/4);
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  StoreFactory Factory(const std::string& sub) {
    std::filesystem::create_directories(dir_ + "/" + sub);
    return GetParam() ? MakeSegmentStoreFactory(dir_ + "/" + sub)
                      : MakeSqliteStoreFactory(dir_ + "/" + sub);
  }
  void Start(int checkpoint_reports, int64_t share_cache_bytes = int64_t{256} << 20) {
    leader_.reset();
    helper_.reset();
    AggregatorOptions o;
    o.pending_share_cache_bytes = share_cache_bytes;
    o.policies = testing::PermissiveTestPolicies();
    o.verify_batch_size = 2;
    o.checkpoint_reports = checkpoint_reports;
    o.role = Role::kHelper;
    helper_ = Aggregator::Create(o, Factory("helper"), nullptr, &clock_, noise_.get()).value();
    channel_.set_helper(helper_.get());
    o.role = Role::kLeader;
    leader_ = Aggregator::Create(o, Factory("leader"), &channel_, &clock_, noise_.get()).value();
  }
  // The store of one server, opened directly (its daemon must be stopped).
  std::unique_ptr<ReportStore> OpenStore(const std::string& role) {
    absl::StatusOr<std::unique_ptr<ReportStore>> s;
    if (GetParam()) {
      s = SegmentReportStore::Open(dir_ + "/" + role + "/task-task.segments");
    } else {
      s = SqliteReportStore::Open(dir_ + "/" + role + "/task-task.sqlite");
    }
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? *std::move(s) : nullptr;
  }
  proto::AggregatorStatusResponse StatusOf(Aggregator& a) {
    proto::AggregatorStatusRequest req;
    req.set_task_id("task");
    return a.Status(req).value();
  }
  // Opens round 1 (params_) on both servers.
  void OpenRound() {
    TANDEM_ASSERT_OK(leader_->OpenRound(params_));
    TANDEM_ASSERT_OK(helper_->OpenRound(params_));
  }

  // Both servers read `cached` shares from the upload cache and `stored`
  // from their stores.
  void ExpectShareReads(uint64_t cached, uint64_t stored) {
    for (Aggregator* a : {leader_.get(), helper_.get()}) {
      EXPECT_EQ(StatusOf(*a).cached_share_reads(), cached);
      EXPECT_EQ(StatusOf(*a).stored_share_reads(), stored);
    }
  }

  // `wire` parsed onto an arena of its own, as the daemon's upload service
  // parses a request (Aggregator::Upload(request, arena)).
  static Aggregator::ArenaUpload OnUploadArena(const proto::UploadRequest& wire) {
    Aggregator::ArenaUpload out = Aggregator::NewArenaUpload();
    EXPECT_TRUE(out.request->ParseFromString(wire.SerializeAsString()));
    return out;
  }

  void Upload(uint64_t seed) {
    TestReport r = MakeReport(params_, seed).value();
    TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
    TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
    AddInto(expected_, r.dense);
  }

  // Finalizes round 1 on both servers: each releases `reports` reports and
  // the two shares sum to every uploaded vector.
  void ExpectReleasedSum(uint64_t reports) {
    proto::FinalizeRequest req;
    req.set_task_id("task");
    req.set_round_id(1);
    TANDEM_ASSERT_OK_AND_ASSIGN(proto::FinalizeResponse a, leader_->Finalize(req));
    TANDEM_ASSERT_OK_AND_ASSIGN(proto::FinalizeResponse b, helper_->Finalize(req));
    EXPECT_EQ(a.accepted_reports(), reports);
    EXPECT_EQ(b.accepted_reports(), reports);
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> sum, testing::SumShares(a, b));
    EXPECT_EQ(sum, expected_);
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> noise_ = DeterministicRandom::FromSeed(7);
  InProcessPeerChannel channel_;
  std::unique_ptr<Aggregator> leader_, helper_;
  proto::RoundParameters params_;
  std::vector<uint64_t> expected_;
};

TEST_P(CheckpointTest, SnapshotEveryNReportsAndARestartReexpandsOnlyTheRest) {
  Start(/*checkpoint_reports=*/4);
  ASSERT_NO_FATAL_FAILURE(OpenRound());
  for (uint64_t s = 1; s <= 9; ++s) Upload(s);
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(9));
  // Batches of 2: snapshots after the 4th and the 8th accepted report.
  EXPECT_EQ(StatusOf(*leader_).accumulator_checkpoints(), 2u);
  EXPECT_EQ(StatusOf(*helper_).accumulator_checkpoints(), 2u);
  EXPECT_EQ(StatusOf(*leader_).accepted_reports(), 9u);
  leader_.reset();
  helper_.reset();
  for (const char* role : {"leader", "helper"}) {
    SCOPED_TRACE(role);
    std::unique_ptr<ReportStore> store = OpenStore(role);
    ASSERT_NE(store, nullptr);
    TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store->LoadAccumulator(1));
    EXPECT_EQ(snap.report_count, 8);
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<ReportRecord> rest,
                                store->ListReports(1, ReportFilter::kAcceptedUncounted));
    ASSERT_EQ(rest.size(), 1u);
    EXPECT_FALSE(rest[0].share.empty());  // kept for the restart
  }
  // Restarted, each server expands the one report after its last snapshot.
  Start(/*checkpoint_reports=*/4);
  EXPECT_EQ(StatusOf(*leader_).share_expansions(), 1u);
  EXPECT_EQ(StatusOf(*helper_).share_expansions(), 1u);
  Upload(10);
  ExpectReleasedSum(10);
  leader_.reset();
  helper_.reset();
  // The release checkpointed first: every accepted report is counted.
  for (const char* role : {"leader", "helper"}) {
    std::unique_ptr<ReportStore> store = OpenStore(role);
    ASSERT_NE(store, nullptr);
    TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store->LoadAccumulator(1));
    EXPECT_EQ(snap.report_count, 10) << role;
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<ReportRecord> rest,
                                store->ListReports(1, ReportFilter::kAcceptedUncounted));
    EXPECT_TRUE(rest.empty()) << role;
  }
}

TEST_P(CheckpointTest, EveryBatchWithCheckpointOne) {
  Start(/*checkpoint_reports=*/1);
  ASSERT_NO_FATAL_FAILURE(OpenRound());
  for (uint64_t s = 1; s <= 5; ++s) Upload(s);
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(5));
  EXPECT_EQ(StatusOf(*leader_).accumulator_checkpoints(), 3u);  // batches 2 + 2 + 1
  // Nothing is left to re-expand after a restart.
  Start(/*checkpoint_reports=*/1);
  EXPECT_EQ(StatusOf(*leader_).share_expansions(), 0u);
  EXPECT_EQ(StatusOf(*helper_).share_expansions(), 0u);
}

// The upload cache (share_cache.h): verification takes the shares the
// uploads parsed; after a restart (cache empty) or with the cache off it
// reads them back from the store; the released sum is the same either way.
TEST_P(CheckpointTest, VerificationUsesTheUploadCacheAndARestartReadsTheStore) {
  Start(/*checkpoint_reports=*/4);
  ASSERT_NO_FATAL_FAILURE(OpenRound());
  for (uint64_t s = 1; s <= 5; ++s) Upload(s);
  // A conflicting upload under a used id is refused and displaces nothing.
  TestReport conflicting = MakeReport(params_, 99).value();
  conflicting.to_leader.set_report_id(MakeReport(params_, 1).value().to_leader.report_id());
  EXPECT_THAT(leader_->Upload(conflicting.to_leader).status(),
              ::tandem::testing::StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(5));
  ExpectShareReads(5, 0);
  Upload(6);
  Upload(7);
  Start(/*checkpoint_reports=*/4);  // restarted: the cache is gone
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(2));
  // Report 5 (after the last snapshot) re-expanded at load, 6 and 7 verified.
  ExpectShareReads(0, 3);
  Start(/*checkpoint_reports=*/4, /*share_cache_bytes=*/0);  // cache off
  Upload(8);
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(1));
  EXPECT_EQ(StatusOf(*leader_).cached_share_reads(), 0u);
  // Reports 5-7 (after the snapshot of 4) re-expanded at load, 8 verified.
  EXPECT_EQ(StatusOf(*leader_).stored_share_reads(), 3u + 1u);
  ExpectReleasedSum(8);
}

// The daemon's path: each request parsed onto an arena of its own
// (Upload(request, arena)), beside copied uploads (Upload(request)). The
// cache keeps the arena, so the share outlives the caller's reference
// (ASan sees any use after free); those reports verify from the cache and
// sum like copied ones. A request off the given arena is refused, not
// adopted, and a refused arena upload is never counted.
TEST_P(CheckpointTest, ArenaUploadsOutliveTheCallersArenaAndCountOnce) {
  Start(/*checkpoint_reports=*/100);
  ASSERT_NO_FATAL_FAILURE(OpenRound());
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    TestReport r = MakeReport(params_, seed).value();
    AddInto(expected_, r.dense);
    if (seed % 2 == 0) {
      TANDEM_ASSERT_OK(leader_->Upload(r.to_leader));
      TANDEM_ASSERT_OK(helper_->Upload(r.to_helper));
      continue;
    }
    for (const proto::UploadRequest* wire : {&r.to_leader, &r.to_helper}) {
      auto [arena, request] = OnUploadArena(*wire);
      Aggregator& to = wire == &r.to_leader ? *leader_ : *helper_;
      TANDEM_ASSERT_OK(to.Upload(request, arena));
      // The caller's reference goes: the cache's keeps the share.
      const std::weak_ptr<google::protobuf::Arena> watch = arena;
      arena.reset();
      EXPECT_FALSE(watch.expired());
    }
  }
  TestReport refused = MakeReport(params_, 1).value();  // a used id
  refused.to_leader.set_round_id(2);
  auto [refused_arena, refused_request] = OnUploadArena(refused.to_leader);
  EXPECT_FALSE(leader_->Upload(refused_request, refused_arena).ok());
  TestReport other = MakeReport(params_, 9).value();
  auto arena = std::make_shared<google::protobuf::Arena>();
  EXPECT_THAT(leader_->Upload(&other.to_leader, arena),  // a heap request
              ::tandem::testing::StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(leader_->Upload(&other.to_leader, nullptr),
              ::tandem::testing::StatusIs(absl::StatusCode::kInternal));
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(4));
  ExpectShareReads(4, 0);
  ExpectReleasedSum(4);
}

// An upload's arena holds more than the share's stored bytes (its first
// block alone is 32 KiB): the cache charges the arena's blocks, so a
// budget of two and a half arenas keeps two such shares, where charging
// stored sizes would have kept all four. The other two are read back from
// the store; the sum is the same.
TEST_P(CheckpointTest, ArenaUploadsAreChargedTheirArenasBlocks) {
  std::vector<TestReport> reports;
  for (uint64_t seed = 1; seed <= 4; ++seed) reports.push_back(MakeReport(params_, seed).value());
  const int64_t arena_bytes =
      static_cast<int64_t>(OnUploadArena(reports[0].to_leader).arena->SpaceAllocated());
  const int64_t stored = static_cast<int64_t>(reports[0].to_leader.ByteSizeLong());
  ASSERT_LE(4 * (stored + 1024), arena_bytes * 5 / 2);  // stored sizes would all fit
  Start(/*checkpoint_reports=*/100, /*share_cache_bytes=*/arena_bytes * 5 / 2);
  ASSERT_NO_FATAL_FAILURE(OpenRound());
  for (const TestReport& r : reports) {
    AddInto(expected_, r.dense);
    auto [la, lr] = OnUploadArena(r.to_leader);
    TANDEM_ASSERT_OK(leader_->Upload(lr, la));
    auto [ha, hr] = OnUploadArena(r.to_helper);
    TANDEM_ASSERT_OK(helper_->Upload(hr, ha));
  }
  ASSERT_THAT(leader_->ProcessPending("task"), ::tandem::testing::IsOkAndHolds(4));
  ExpectShareReads(2, 2);
  ExpectReleasedSum(4);
}

TEST(CheckpointOptions, AtLeastOneReport) {
  FakeClock clock;
  auto noise = DeterministicRandom::FromSeed(1);
  AggregatorOptions o;
  o.role = Role::kHelper;
  o.checkpoint_reports = 0;
  EXPECT_THAT(
      Aggregator::Create(o, MakeSqliteStoreFactory("/tmp"), nullptr, &clock, noise.get()).status(),
      ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

INSTANTIATE_TEST_SUITE_P(Stores, CheckpointTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Segment" : "Sqlite";
                         });

}  // namespace
}  // namespace tandem::aggregator
