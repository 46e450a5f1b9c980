// Two real tandem-aggregator processes on loopback, driven over gRPC as the
// clients and the coordinator drive them: plaintext and mutual TLS, sums,
// malformed input, SIGKILL in the middle of a round, and shares damaged on
// disk while the daemons were down.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "aggregator/testing/report_factory.h"
#include "base/grpc_status.h"
#include "base/sqlite/database.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using aggregator::testing::MakeReport;
using aggregator::testing::MakeRoundParameters;
using aggregator::testing::AddInto;
using aggregator::testing::SumShares;
using aggregator::testing::TestReport;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::IsOk;
using ::tandem::testing::Loopback;
using ::tandem::testing::StatusIs;

using Endpoint = tandem::testing::AggregatorEndpoint;

class AggregatorDaemonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-daemons");
    ASSERT_FALSE(dir_.empty());
    params_ = MakeRoundParameters("fl-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                  /*num_groups=*/4);
  }
  void TearDown() override {
    leader_.reset();
    helper_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> Args(const std::string& role, const std::string& extra_peer) {
    // The bare aggregation protocol (tickets, roles and the privacy policy
    // are tested in adversarial_test.cc).
    std::vector<std::string> args = testing::BareAggregatorArgs(role, dir_);
    if (!extra_peer.empty()) args.push_back("--peer=" + extra_peer);
    if (segment_files_) args.push_back("--segment_share_files");
    return args;
  }

  void StartDaemons() {
    leader_.reset();
    helper_.reset();
    auto h = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, Args("helper", ""), dir_ + "/helper.log");
    ASSERT_THAT(h, IsOk());
    helper_ = *std::move(h);
    auto l = DaemonProcess::Start(TANDEM_AGGREGATOR_BIN,
                                  Args("leader", Loopback(helper_->port())), dir_ + "/leader.log");
    ASSERT_THAT(l, IsOk());
    leader_ = *std::move(l);
    leader_ep_ = Connect(leader_->port());
    helper_ep_ = Connect(helper_->port());
  }

  Endpoint Connect(int port) {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    auto channel = grpc::CreateCustomChannel(Loopback(port), creds, args);
    return {proto::AggregatorUpload::NewStub(channel),
            proto::AggregatorCollector::NewStub(channel)};
  }

  absl::Status Open(const Endpoint& ep) { return ep.Open(params_); }
  absl::Status Upload(const Endpoint& ep, const proto::UploadRequest& req) { return ep.Upload(req); }
  absl::StatusOr<proto::FinalizeResponse> Finalize(const Endpoint& ep) {
    return ep.Finalize(params_.task_id(), params_.round_id());
  }
  absl::StatusOr<proto::AggregatorStatusResponse> Status(const Endpoint& ep) {
    return ep.Status(params_.task_id());
  }

  // Finalizes on both; the shares' sum mod 2^64, or mod 2^32 in a 32-bit
  // round, must be `expected`.
  void ExpectSum(const std::vector<uint64_t>& expected, uint64_t count) {
    auto a = Finalize(leader_ep_);
    ASSERT_THAT(a, IsOk());
    auto b = Finalize(helper_ep_);
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(a->accepted_reports(), count);
    EXPECT_EQ(b->accepted_reports(), count);
    auto sum = SumShares(*a, *b);
    ASSERT_THAT(sum, IsOk());
    if (params_.group_parameters().value_bits() == 32) {
      for (uint64_t& v : *sum) v &= 0xffffffffu;
    }
    EXPECT_EQ(*sum, expected);
  }

  std::string dir_;
  proto::RoundParameters params_;
  bool segment_files_ = false;
  void SigkillMidRound();
  std::unique_ptr<DaemonProcess> leader_, helper_;
  Endpoint leader_ep_, helper_ep_;
  // Damages the stored share of the `index`-th report (upload order) that
  // `role`'s store holds; the daemons must be stopped.
  void DamageStoredShare(const std::string& role, const std::vector<std::string>& report_ids,
                         size_t index);
  void DamagedShareOnDisk(const std::string& damaged_role);
};

TEST_F(AggregatorDaemonsTest, SumOfManyClientsEqualsPlainSum) {
  StartDaemons();
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(Upload(leader_ep_, r->to_leader));
    TANDEM_ASSERT_OK(Upload(helper_ep_, r->to_helper));
    AddInto(expected, r->dense);
  }
  ExpectSum(expected, 24);
}

TEST_F(AggregatorDaemonsTest, MalformedRequestsGetInvalidArgumentAndChangeNothing) {
  StartDaemons();
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  auto good = MakeReport(params_, 1);
  ASSERT_THAT(good, IsOk());
  TANDEM_ASSERT_OK(Upload(leader_ep_, good->to_leader));
  TANDEM_ASSERT_OK(Upload(helper_ep_, good->to_helper));

  auto bad = MakeReport(params_, 2);
  ASSERT_THAT(bad, IsOk());
  proto::UploadRequest truncated = bad->to_leader;
  truncated.mutable_key_share()->mutable_keys(2)->mutable_value_correction()->RemoveLast();
  EXPECT_THAT(Upload(leader_ep_, truncated), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::UploadRequest wrong_party = bad->to_helper;  // helper's key sent to the leader
  EXPECT_THAT(Upload(leader_ep_, wrong_party), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::UploadRequest bad_task = bad->to_leader;
  bad_task.set_task_id("no/such/task");
  EXPECT_THAT(Upload(leader_ep_, bad_task), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::OpenRoundRequest bad_open;
  *bad_open.mutable_parameters() = params_;
  bad_open.mutable_parameters()->set_dimension(3);
  grpc::ClientContext ctx;
  proto::OpenRoundResponse resp;
  EXPECT_EQ(leader_ep_.collector->OpenRound(&ctx, bad_open, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ExpectSum(good->dense, 1);
}

// A 32-bit round takes PREAMBLE keys whose value corrections are packed at
// 4 bytes: a client that sends them as fixed64 words (the 64-bit form, twice
// the bytes) or both forms at once is refused by either daemon and the sum
// holds only the good report, mod 2^32.
TEST_F(AggregatorDaemonsTest, ThirtyTwoBitRoundsTakeOnlyPackedKeys) {
  params_.mutable_group_parameters()->set_value_bits(32);
  StartDaemons();
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  auto good = MakeReport(params_, 1);
  ASSERT_THAT(good, IsOk());
  ASSERT_EQ(good->to_leader.key_share().keys(0).value_correction_packed().size(), 4u * 16);
  TANDEM_ASSERT_OK(Upload(leader_ep_, good->to_leader));
  TANDEM_ASSERT_OK(Upload(helper_ep_, good->to_helper));

  auto bad = MakeReport(params_, 2);
  ASSERT_THAT(bad, IsOk());
  for (auto [req, ep] : {std::pair{bad->to_leader, &leader_ep_}, {bad->to_helper, &helper_ep_}}) {
    proto::UploadRequest wide = req;  // every key's corrections as fixed64 words
    for (proto::BlockDpfKey& key : *wide.mutable_key_share()->mutable_keys()) {
      const std::string packed = key.value_correction_packed();
      for (size_t j = 0; j < packed.size(); j += 4) {
        uint32_t v;
        std::memcpy(&v, packed.data() + j, 4);
        key.add_value_correction(v);
      }
      key.clear_value_correction_packed();
    }
    EXPECT_THAT(Upload(*ep, wide), StatusIs(absl::StatusCode::kInvalidArgument));
    proto::UploadRequest both = req;  // the packed words and one fixed64 more
    both.mutable_key_share()->mutable_keys(1)->add_value_correction(0);
    EXPECT_THAT(Upload(*ep, both), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  ExpectSum(good->dense, 1);
}

TEST_F(AggregatorDaemonsTest, SigkillMidRoundLosesNoAcceptedReport) { SigkillMidRound(); }

// The same with shares in segment files (AggregatorConfig.segment_share_files).
TEST_F(AggregatorDaemonsTest, SigkillMidRoundLosesNoAcceptedReportWithSegmentFiles) {
  segment_files_ = true;
  SigkillMidRound();
}

void AggregatorDaemonsTest::SigkillMidRound() {
  StartDaemons();
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  for (const char* role : {"leader", "helper"}) {  // which store each daemon runs
    EXPECT_EQ(std::filesystem::is_directory(dir_ + "/" + role + "/task-fl-task.segments"),
              segment_files_);
  }
  std::vector<uint64_t> expected;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(Upload(leader_ep_, r->to_leader));
    TANDEM_ASSERT_OK(Upload(helper_ep_, r->to_helper));
    AddInto(expected, r->dense);
  }
  // Wait until the leader's background pass has counted them (bounded).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    auto s = Status(leader_ep_);
    ASSERT_THAT(s, IsOk());
    if (s->accepted_reports() == 6) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto mid = MakeReport(params_, 7);  // uploaded, then both servers are killed
  ASSERT_THAT(mid, IsOk());
  TANDEM_ASSERT_OK(Upload(leader_ep_, mid->to_leader));
  TANDEM_ASSERT_OK(Upload(helper_ep_, mid->to_helper));
  AddInto(expected, mid->dense);
  helper_->Kill();
  leader_->Kill();
  StartDaemons();  // same state directories
  auto after = MakeReport(params_, 8);
  ASSERT_THAT(after, IsOk());
  TANDEM_ASSERT_OK(Upload(leader_ep_, after->to_leader));
  TANDEM_ASSERT_OK(Upload(helper_ep_, after->to_helper));
  AddInto(expected, after->dense);
  // A report accepted before the crash cannot be replayed after it.
  EXPECT_THAT(Upload(leader_ep_, MakeReport(params_, 9)->to_leader), IsOk());
  proto::UploadRequest replay = MakeReport(params_, 10)->to_leader;
  replay.set_report_id(mid->to_leader.report_id());
  EXPECT_THAT(Upload(leader_ep_, replay), StatusIs(absl::StatusCode::kAlreadyExists));
  ExpectSum(expected, 8);  // report 9 reached the leader only: never counted
}

// A share damaged on disk while a daemon was down (a flipped byte in a
// segment record, or another report's share in a SQLite row) rejects that
// report alone: the others of its exchange are still verified and summed,
// and the damaged one is never counted, on either server. (Before, the
// batch read failed whole with DATA_LOSS, so every exchange holding it
// failed and the round could not count its neighbours.)
void AggregatorDaemonsTest::DamagedShareOnDisk(const std::string& damaged_role) {
  StartDaemons();
  TANDEM_ASSERT_OK(Open(leader_ep_));
  TANDEM_ASSERT_OK(Open(helper_ep_));
  // The damaged side gets its shares first and alone, so that nothing is
  // verified (the leader's passes find the helper without them) and its
  // upload cache is gone after the restart: the shares are read from disk.
  const bool damage_helper = damaged_role == "helper";
  std::vector<TestReport> reports;
  std::vector<std::string> ids;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = MakeReport(params_, seed);
    ASSERT_THAT(r, IsOk());
    TANDEM_ASSERT_OK(Upload(damage_helper ? helper_ep_ : leader_ep_,
                            damage_helper ? r->to_helper : r->to_leader));
    ids.push_back(r->to_leader.report_id());
    reports.push_back(*std::move(r));
  }
  helper_->Kill();
  leader_->Kill();
  constexpr size_t kDamaged = 2;
  DamageStoredShare(damaged_role, ids, kDamaged);
  StartDaemons();  // same state directories; empty upload caches
  std::vector<uint64_t> expected;
  for (size_t i = 0; i < reports.size(); ++i) {
    TANDEM_ASSERT_OK(Upload(damage_helper ? leader_ep_ : helper_ep_,
                            damage_helper ? reports[i].to_leader : reports[i].to_helper));
    if (i != kDamaged) AddInto(expected, reports[i].dense);
  }
  ExpectSum(expected, reports.size() - 1);
  for (const Endpoint* ep : {&leader_ep_, &helper_ep_}) {
    auto s = Status(*ep);
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->rejected_reports(), 1u);
  }
}

void AggregatorDaemonsTest::DamageStoredShare(const std::string& role,
                                              const std::vector<std::string>& report_ids,
                                              size_t index) {
  const std::string task_dir = dir_ + "/" + role + "/task-fl-task";
  if (!segment_files_) {
    // Another report's (valid) share in this report's row.
    auto db = sqlite::Database::Open(task_dir + ".sqlite", {});
    ASSERT_THAT(db.status(), IsOk());
    const size_t other = (index + 1) % report_ids.size();
    TANDEM_ASSERT_OK((*db)->Exec(
        absl::StrCat("UPDATE reports SET share = (SELECT share FROM reports WHERE report_id = x'",
                     absl::BytesToHexString(report_ids[other]), "') WHERE report_id = x'",
                     absl::BytesToHexString(report_ids[index]), "'")));
    return;
  }
  // Segment records: magic (4) | length LE (4) | tag (8) | CRC (4) | payload
  // (aggregator/store/segment_file.h), in upload order in the one segment.
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::recursive_directory_iterator(task_dir + ".segments")) {
    if (e.path().extension() == ".seg") segments.push_back(e.path().string());
  }
  ASSERT_EQ(segments.size(), 1u);
  std::fstream f(segments[0], std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t offset = 0;
  for (size_t i = 0; i < index; ++i) {
    ASSERT_LE(offset + 20, bytes.size());
    uint32_t length;
    std::memcpy(&length, bytes.data() + offset + 4, 4);
    offset += 20 + length;
  }
  ASSERT_LT(offset + 20 + 64, bytes.size());
  ASSERT_EQ(bytes.substr(offset, 3), "TSG");
  f.seekp(static_cast<std::streamoff>(offset + 20 + 64));
  f.put(static_cast<char>(bytes[offset + 20 + 64] ^ 0x10));
  ASSERT_TRUE(f.good());
}

TEST_F(AggregatorDaemonsTest, ShareDamagedOnTheHelpersDiskRejectsOnlyItsReport) {
  DamagedShareOnDisk("helper");
}
TEST_F(AggregatorDaemonsTest, ShareDamagedOnTheLeadersDiskRejectsOnlyItsReport) {
  DamagedShareOnDisk("leader");
}
TEST_F(AggregatorDaemonsTest, ShareDamagedInTheHelpersSegmentsRejectsOnlyItsReport) {
  segment_files_ = true;
  DamagedShareOnDisk("helper");
}
TEST_F(AggregatorDaemonsTest, ShareDamagedInTheLeadersSegmentsRejectsOnlyItsReport) {
  segment_files_ = true;
  DamagedShareOnDisk("leader");
}

}  // namespace
}  // namespace tandem
