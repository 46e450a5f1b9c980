// SegmentReportStore-specific behaviour: reopening, torn tails, corruption
// of segments and of the locations in the index, segment reclaim, locking.
// The ReportStore contract itself runs in report_store_test.cc.
#include "aggregator/store/segment_report_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/sqlite/database.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

std::string Share(int i, size_t n = 100) {
  std::string s(n, '\0');
  for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>(i * 31 + k * 7);
  return s;
}

class SegmentReportStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("tandem_segstore_", getpid(), "_", info->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Reopen(int64_t max_segment_bytes = SegmentFiles::kDefaultMaxSegmentBytes) {
    store_.reset();
    SegmentStoreOptions options;
    options.max_segment_bytes = max_segment_bytes;
    auto s = SegmentReportStore::Open(dir_, options);
    ASSERT_THAT(s.status(), IsOk());
    store_ = std::move(*s);
  }
  std::vector<std::string> SegmentFileNames() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/segments")) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string Seg(int n) {
    return absl::StrCat(dir_, "/segments/", absl::Dec(n, absl::kZeroPad6), ".seg");
  }
  // Runs raw SQL on the index behind the store's back (store closed).
  void TamperIndex(const std::string& sql) {
    store_.reset();
    auto db = sqlite::Database::Open(dir_ + "/index.sqlite", {});
    ASSERT_THAT(db.status(), IsOk());
    ASSERT_THAT((*db)->Exec(sql), IsOk());
  }
  // Overwrites one byte of a segment file.
  void FlipByte(const std::string& path, int64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(offset);
    char c = 0;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x5a));
  }

  std::string dir_;
  std::unique_ptr<SegmentReportStore> store_;
};

TEST_F(SegmentReportStoreTest, SharesSurviveReopenAndNewWritesGoToANewSegment) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  std::vector<PendingReport> batch = {{"a", Share(1)}, {"b", Share(2, 5000)}, {"c", ""}};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto results, store_->PutPendingBatch(1, batch));
  for (const absl::Status& s : results) EXPECT_THAT(s, IsOk());
  EXPECT_EQ(SegmentFileNames(), std::vector<std::string>{"000001.seg"});
  Reopen();
  for (const PendingReport& r : batch) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const ReportRecord rec, store_->GetReport(r.report_id));
    EXPECT_EQ(rec.share, r.share);
    EXPECT_EQ(rec.share_digest, ShareDigest(r.share));
  }
  ASSERT_THAT(store_->PutPending(1, "d", Share(4)), IsOk());
  EXPECT_EQ(SegmentFileNames(), (std::vector<std::string>{"000001.seg", "000002.seg"}));
  // Idempotent retry appends nothing; a conflicting one is refused.
  const auto size = std::filesystem::file_size(Seg(2));
  EXPECT_THAT(store_->PutPending(1, "d", Share(4)), IsOk());
  EXPECT_THAT(store_->PutPending(1, "d", Share(5)), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(std::filesystem::file_size(Seg(2)), size);
}

TEST_F(SegmentReportStoreTest, TornTailRecordIsIgnored) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store_->PutPending(1, "a", Share(1)), IsOk());
  store_.reset();
  {
    // A crash mid-append: half a record after the last indexed one.
    std::ofstream f(Seg(1), std::ios::app | std::ios::binary);
    const std::string torn = std::string("TSG1\x64\x00\x00\x00", 8) + "partial";
    f.write(torn.data(), static_cast<std::streamsize>(torn.size()));
  }
  Reopen();
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord a, store_->GetReport("a"));
  EXPECT_EQ(a.share, Share(1));
  ASSERT_THAT(store_->PutPending(1, "b", Share(2)), IsOk());
  Reopen();
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_EQ(b.share, Share(2));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto pending, store_->ListReports(1, ReportFilter::kPending));
  EXPECT_EQ(pending.size(), 2u);
}

TEST_F(SegmentReportStoreTest, CorruptPayloadOrHeaderIsDataLoss) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store_->PutPending(1, "a", Share(1)), IsOk());
  ASSERT_THAT(store_->PutPending(1, "b", Share(2)), IsOk());
  store_.reset();
  const int64_t record = SegmentFiles::kHeaderBytes + 100;
  FlipByte(Seg(1), SegmentFiles::kHeaderBytes + 40);  // a's payload
  FlipByte(Seg(1), record + 1);                       // b's magic
  Reopen();
  // A share record is checked by its digest (TSG2 records carry no CRC).
  EXPECT_THAT(store_->GetReport("a"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("digest mismatch")));
  EXPECT_THAT(store_->GetReport("b"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("magic")));
  EXPECT_THAT(store_->ListReports(1, ReportFilter::kPending).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  // What needs no share still works.
  TANDEM_ASSERT_OK_AND_ASSIGN(const ReportCounts counts, store_->CountReports(1));
  EXPECT_EQ(counts.pending, 2);
}

// Share records written before 2026-12-07 carry a CRC-32C ("TSG1"); they
// still read, checked by it, and a snapshot record never goes without one.
TEST_F(SegmentReportStoreTest, OlderCrcShareRecordsReadAndSnapshotsKeepTheirCrc) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  const std::string share = Share(1);
  ASSERT_THAT(store_->PutPending(1, "a", share), IsOk());
  ASSERT_THAT(store_->PutPending(1, "b", Share(2)), IsOk());
  ASSERT_THAT(store_->SaveAccumulator(1, std::string(64, 'x'), {}), IsOk());
  store_.reset();
  // Turn a's record into an older store's: magic TSG1, CRC of the payload.
  std::string header;
  {
    std::ifstream in(Seg(1), std::ios::binary);
    header.resize(SegmentFiles::kHeaderBytes);
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
  }
  ASSERT_EQ(header.substr(0, 4), "TSG2");
  EXPECT_EQ(header.substr(16, 4), std::string(4, '\0'));  // no CRC
  const uint32_t crc = Crc32c(share);
  {
    std::fstream f(Seg(1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('1');
    f.seekp(16);
    for (int i = 0; i < 4; ++i) f.put(static_cast<char>((crc >> (8 * i)) & 0xff));
  }
  Reopen();
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord a, store_->GetReport("a"));
  EXPECT_EQ(a.share, share);
  store_.reset();
  FlipByte(Seg(1), SegmentFiles::kHeaderBytes + 40);  // a's payload, under its CRC now
  // The snapshot's record claims to need no CRC: refused, not trusted.
  const std::string snapshots = dir_ + "/accumulators";
  ASSERT_TRUE(std::filesystem::exists(snapshots + "/000001.seg")) << snapshots;
  {
    std::fstream f(snapshots + "/000001.seg", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('2');
  }
  Reopen();
  EXPECT_THAT(store_->GetReport("a"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum")));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_EQ(b.share, Share(2));
  EXPECT_THAT(store_->LoadAccumulator(1).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("magic")));
}

TEST(Crc32cTest, KnownAnswerOnBothPaths) {
  EXPECT_EQ(Crc32cPortable("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  const std::string long_input = Share(3, 1001);
  EXPECT_EQ(Crc32c(long_input), Crc32cPortable(long_input));
  // The three-stream path (12 KiB steps) and its tails, at every length
  // around the step boundaries.
  std::string big(3 * 12288 + 77, '\0');  // not periodic: the streams differ
  uint64_t x = 88172645463325252ull;
  for (char& ch : big) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ch = static_cast<char>(x);
  }
  for (size_t n :
       {size_t{12287}, size_t{12288}, size_t{12289}, size_t{24576 + 5}, size_t{3 * 12288 + 77}}) {
    const absl::string_view in(big.data(), n);
    EXPECT_EQ(Crc32c(in), Crc32cPortable(in)) << n;
  }
}

TEST_F(SegmentReportStoreTest, LocationOfAnotherReportsRecordIsDataLoss) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store_->PutPendingBatch(1, {{"a", Share(1)}, {"b", Share(2)}}).status(), IsOk());
  // Same length, valid record, wrong owner.
  TamperIndex(absl::StrCat("UPDATE reports SET off = ", SegmentFiles::kHeaderBytes + 100,
                           " WHERE report_id = CAST('a' AS BLOB)"));
  Reopen();
  EXPECT_THAT(store_->GetReport("a"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("another owner")));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_EQ(b.share, Share(2));
}

TEST_F(SegmentReportStoreTest, AccumulatorSnapshotsLiveInSegmentsAndAreValidated) {
  Reopen(/*max_segment_bytes=*/1);  // One snapshot per accumulator segment.
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  const std::string big(10000, 'x');
  for (int i = 0; i < 4; ++i) {
    ASSERT_THAT(store_->PutPending(1, absl::StrCat("r", i), Share(i)), IsOk());
    ASSERT_THAT(store_->CommitBatch(1, absl::StrCat(big, i), {absl::StrCat("r", i)}, {}), IsOk());
  }
  // Older snapshots are reclaimed; only the latest (active) one is left.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/accumulators")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
  Reopen();
  TANDEM_ASSERT_OK_AND_ASSIGN(AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, absl::StrCat(big, 3));
  EXPECT_EQ(snap.report_count, 4);
  EXPECT_EQ(snap.version, 4);
  ASSERT_THAT(store_->ReleaseRound(1, "noised"), IsOk());
  Reopen();
  TANDEM_ASSERT_OK_AND_ASSIGN(snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.bytes, "noised");
  // A damaged snapshot is DATA_LOSS, not a wrong sum.
  store_.reset();
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/accumulators")) {
    FlipByte(e.path().string(), SegmentFiles::kHeaderBytes + 2);
  }
  Reopen();
  EXPECT_THAT(store_->LoadAccumulator(1).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum")));
  TamperIndex("UPDATE accumulators SET off = 7");
  Reopen();
  EXPECT_THAT(store_->LoadAccumulator(1).status(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(SegmentReportStoreTest, LocationsFromTheIndexAreValidated) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"UPDATE reports SET off = -1", "location"},
      {"UPDATE reports SET off = 1", "shorter"},
      {"UPDATE reports SET off = 1000000", "shorter"},
      {"UPDATE reports SET len = 99", "length"},
      {"UPDATE reports SET len = 1000000000", "location"},
      {"UPDATE reports SET seg = 7", "missing"},
      {"UPDATE reports SET seg = 0", "location"},
      {"UPDATE reports SET off = NULL", "partly"},
      {"UPDATE reports SET seg = NULL, off = NULL, len = NULL", "wrong state"},
      {"UPDATE reports SET state = 2", "wrong state"},
  };
  for (const auto& [sql, message] : cases) {
    SCOPED_TRACE(sql);
    std::filesystem::remove_all(dir_);
    Reopen();
    ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
    ASSERT_THAT(store_->PutPending(1, "a", Share(1)), IsOk());
    TamperIndex(sql);
    Reopen();
    EXPECT_THAT(store_->GetReport("a"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(message)));
  }
}

TEST_F(SegmentReportStoreTest, SegmentWithoutLiveRecordsIsReclaimed) {
  Reopen(/*max_segment_bytes=*/1);  // One batch per segment.
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store_->PutPending(1, "a", Share(1)), IsOk());  // 000001
  ASSERT_THAT(store_->PutPending(1, "b", Share(2)), IsOk());  // 000002
  ASSERT_THAT(store_->PutPending(1, "c", Share(3)), IsOk());  // 000003 (active)
  EXPECT_EQ(SegmentFileNames().size(), 3u);
  ASSERT_THAT(store_->MarkRejected("a"), IsOk());
  EXPECT_EQ(SegmentFileNames(), (std::vector<std::string>{"000002.seg", "000003.seg"}));
  ASSERT_THAT(store_->CommitBatch(1, "acc", {"b", "c"}, {}), IsOk());
  EXPECT_EQ(SegmentFileNames(), std::vector<std::string>{"000003.seg"});  // still active
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportRecord b, store_->GetReport("b"));
  EXPECT_TRUE(b.counted);
  EXPECT_TRUE(b.share.empty());
  Reopen();  // 000003 is no longer active: nothing names it, so it goes.
  EXPECT_TRUE(SegmentFileNames().empty());
  TANDEM_ASSERT_OK_AND_ASSIGN(const AccumulatorSnapshot snap, store_->LoadAccumulator(1));
  EXPECT_EQ(snap.report_count, 2);
  EXPECT_EQ(snap.bytes, "acc");
  // Replay protection outlives the segments.
  EXPECT_THAT(store_->PutPending(1, "a", Share(9)), StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST_F(SegmentReportStoreTest, TruncatedSegmentIsDataLoss) {
  Reopen();
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  ASSERT_THAT(store_->PutPending(1, "a", Share(1)), IsOk());
  store_.reset();
  std::filesystem::resize_file(Seg(1), 50);
  Reopen();
  EXPECT_THAT(store_->GetReport("a"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("shorter")));
}

// The store's lock is not held while an upload batch's shares are written
// and synced: commits, snapshots and state reads run meanwhile, and every
// batch lands whole with its own answers (duplicates inside a batch too).
TEST_F(SegmentReportStoreTest, CommitsAndReadsRunWhileUploadBatchesAreWritten) {
  Reopen(/*max_segment_bytes=*/4096);  // rotations during the run
  ASSERT_THAT(store_->OpenRound(1, "p"), IsOk());
  constexpr int kBatches = 40, kPerBatch = 8;
  std::atomic<int> uploaded_batches{0};
  std::atomic<bool> failed{false};
  std::thread uploader([&] {
    for (int b = 0; b < kBatches; ++b) {
      std::vector<PendingReport> batch;
      for (int i = 0; i < kPerBatch; ++i) {
        batch.push_back({absl::StrCat("r", b, "_", i), Share(b * kPerBatch + i, 300)});
      }
      batch.push_back(batch.front());                         // identical repeat: OK
      batch.push_back({batch.front().report_id, Share(-1)});  // conflicting: refused
      absl::StatusOr<std::vector<absl::Status>> out = store_->PutPendingBatch(1, batch);
      if (!out.ok() || out->size() != batch.size() || !(*out)[kPerBatch].ok() ||
          !absl::IsAlreadyExists((*out)[kPerBatch + 1])) {
        failed = true;
        return;
      }
      for (int i = 0; i < kPerBatch; ++i) failed = failed || !(*out)[i].ok();
      ++uploaded_batches;
    }
  });
  // Meanwhile: decide whatever is pending, snapshot now and then, read states.
  int decided = 0, rounds = 0;
  while (decided < kBatches * kPerBatch && !failed) {
    auto pending = store_->ListReportStates(1, ReportFilter::kPending);
    ASSERT_THAT(pending.status(), IsOk());
    std::vector<std::string> accept, reject;
    for (const ReportRecord& r : *pending)
      (accept.size() <= reject.size() ? accept : reject).push_back(r.report_id);
    if (++rounds % 3 == 0) {
      ASSERT_THAT(store_->CommitBatch(1, absl::StrCat("acc", rounds), accept, reject), IsOk());
    } else {
      ASSERT_THAT(store_->CommitDecisions(1, accept, reject), IsOk());
    }
    decided += static_cast<int>(accept.size() + reject.size());
    ASSERT_THAT(store_->GetReportStates(accept).status(), IsOk());
  }
  uploader.join();
  ASSERT_FALSE(failed);
  EXPECT_EQ(uploaded_batches, kBatches);
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportCounts c, store_->CountReports(1));
  EXPECT_EQ(c.pending, 0);
  EXPECT_EQ(c.accepted + c.rejected, kBatches * kPerBatch);
  // Every accepted share that is still kept reads back intact after a reopen.
  Reopen(4096);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto kept, store_->ListReports(1, ReportFilter::kAcceptedUncounted));
  for (const ReportRecord& r : kept) EXPECT_EQ(r.share.size(), 300u) << r.report_id;
}

TEST_F(SegmentReportStoreTest, OneProcessAtATime) {
  Reopen();
  EXPECT_THAT(SegmentReportStore::Open(dir_).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in use")));
  store_.reset();
  EXPECT_THAT(SegmentReportStore::Open(dir_).status(), IsOk());
}

TEST_F(SegmentReportStoreTest, NewerSchemaIsRefused) {
  Reopen();
  TamperIndex("UPDATE schema_version SET version = 99 WHERE component = 'segment_report_store'");
  EXPECT_THAT(SegmentReportStore::Open(dir_).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
}

}  // namespace
}  // namespace tandem::aggregator
