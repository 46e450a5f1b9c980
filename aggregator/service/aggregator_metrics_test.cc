// The aggregators' /metrics: a leader and a helper daemon in this process
// (plaintext on loopback, unticketed, permissive policy), driven over gRPC
// as clients and the coordinator drive them; both scraped over HTTP.
#include "aggregator/service/aggregator_metrics.h"

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <grpcpp/create_channel.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "aggregator/service/daemon.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/grpc_status.h"
#include "base/random.h"
#include "base/testing/http_get.h"
#include "base/testing/status_matchers.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::HttpGet;
using ::tandem::testing::IsOk;

// The value of the sample of `name` whose labels include all of `labels`.
std::optional<double> Sample(const std::string& page, const std::string& name,
                             const std::map<std::string, std::string>& labels) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, name + "{") && !absl::StartsWith(line, name + " ")) continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      all = all && absl::StrContains(line, absl::StrCat(k, "=\"", v, "\""));
    }
    double value;
    if (all && absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return value;
  }
  return std::nullopt;
}

proto::AggregatorConfig Config(const std::string& role, const std::string& dir) {
  proto::AggregatorConfig c;
  c.set_role(role);
  c.set_listen_address("127.0.0.1:0");
  c.set_state_path(dir + "/" + role);
  c.mutable_tls()->set_insecure_plaintext(true);
  c.set_allow_unticketed_uploads(true);
  c.set_allow_unprovisioned_tasks(true);
  c.set_metrics_listen_address("127.0.0.1:0");
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "min_noise_multiplier: 0 min_batch_size: 1 require_norm_proofs: false epsilon_budget: inf",
      c.mutable_default_policy()));
  return c;
}

struct Stubs {
  std::unique_ptr<proto::AggregatorUpload::Stub> upload;
  std::unique_ptr<proto::AggregatorCollector::Stub> collector;
};

Stubs Connect(int port) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  return {proto::AggregatorUpload::NewStub(channel),
          proto::AggregatorCollector::NewStub(channel)};
}

absl::Status Upload(const Stubs& s, const proto::UploadRequest& request) {
  grpc::ClientContext context;
  proto::UploadResponse response;
  return FromGrpcStatus(s.upload->Upload(&context, request, &response));
}

absl::Status Open(const Stubs& s, const proto::RoundParameters& params) {
  grpc::ClientContext context;
  proto::OpenRoundRequest request;
  *request.mutable_parameters() = params;
  proto::OpenRoundResponse response;
  return FromGrpcStatus(s.collector->OpenRound(&context, request, &response));
}

TEST(AggregatorMetricsTest, UploadsBatchesAndTaskStatusOnBothServers) {
  const std::string dir = ::testing::TempDir() + "/aggregator_metrics_test";
  std::filesystem::remove_all(dir);
  auto helper = AggregatorDaemon::Start(Config("helper", dir), RealClock::Default(), OpenSslRandom::Default());
  ASSERT_THAT(helper, IsOk());
  proto::AggregatorConfig leader_config = Config("leader", dir);
  leader_config.mutable_peer()->set_address(absl::StrCat("127.0.0.1:", (*helper)->port()));
  auto leader = AggregatorDaemon::Start(leader_config, RealClock::Default(), OpenSslRandom::Default(),
                                        absl::Milliseconds(20));
  ASSERT_THAT(leader, IsOk());
  ASSERT_GT((*leader)->metrics_port(), 0);
  ASSERT_GT((*helper)->metrics_port(), 0);
  const Stubs l = Connect((*leader)->port()), h = Connect((*helper)->port());

  const proto::RoundParameters params =
      testing::MakeRoundParameters("metrics-task", 1, /*log_num_blocks=*/4, /*block_size=*/16,
                                   /*num_groups=*/2);
  ASSERT_THAT(Open(l, params), IsOk());
  ASSERT_THAT(Open(h, params), IsOk());
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto report = testing::MakeReport(params, seed);
    ASSERT_THAT(report, IsOk());
    ASSERT_THAT(Upload(l, report->to_leader), IsOk());
    ASSERT_THAT(Upload(h, report->to_helper), IsOk());
  }
  proto::UploadRequest wrong_round = testing::MakeReport(params, 9)->to_leader;
  wrong_round.set_round_id(7);
  EXPECT_FALSE(Upload(l, wrong_round).ok());

  // The leader verifies the three with the helper in its background loop.
  std::string leader_page, helper_page;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const std::map<std::string, std::string> accepted = {{"task", "metrics-task"},
                                                        {"state", "accepted"}};
  while (absl::Now() < deadline) {
    leader_page = HttpGet((*leader)->metrics_port(), "/metrics");
    helper_page = HttpGet((*helper)->metrics_port(), "/metrics");
    // The pass's local time is observed after the pass returns, a moment
    // after its commit shows in the counts: wait for both.
    if (Sample(leader_page, "tandem_aggregator_reports", accepted) == 3 &&
        Sample(helper_page, "tandem_aggregator_reports", accepted) == 3 &&
        Sample(leader_page, "tandem_aggregator_verification_batch_seconds_count",
               {{"part", "local"}})
                .value_or(0) >= 1) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Sample(leader_page, "tandem_aggregator_reports",
                   {{"role", "leader"}, {"task", "metrics-task"}, {"state", "accepted"}}),
            3)
      << leader_page;
  EXPECT_EQ(Sample(leader_page, "tandem_aggregator_uploads_total",
                   {{"role", "leader"}, {"code", "OK"}}),
            3)
      << leader_page;
  double refused = 0;
  for (const char* code : {"NOT_FOUND", "FAILED_PRECONDITION", "INVALID_ARGUMENT"}) {
    refused += Sample(leader_page, "tandem_aggregator_uploads_total", {{"code", code}}).value_or(0);
  }
  EXPECT_EQ(refused, 1) << leader_page;
  EXPECT_GE(Sample(leader_page, "tandem_aggregator_verification_batches_total", {{"code", "OK"}})
                .value_or(0),
            1)
      << leader_page;
  // How the core groups reports into exchanges is its own business: some.
  EXPECT_GE(Sample(leader_page, "tandem_aggregator_verification_reports_total", {}).value_or(0), 1)
      << leader_page;
  EXPECT_GE(Sample(leader_page, "tandem_aggregator_verification_batch_seconds_count",
                   {{"part", "local"}})
                .value_or(0),
            1)
      << leader_page;
  EXPECT_EQ(Sample(leader_page, "tandem_aggregator_open_round", {{"task", "metrics-task"}}), 1);
  EXPECT_EQ(Sample(leader_page, "tandem_aggregator_epsilon_spent", {{"task", "metrics-task"}}), 0);
  // What stays added is one expansion per accepted report (a report that
  // reached the leader before the helper is added and taken out again).
  EXPECT_EQ(Sample(leader_page, "tandem_aggregator_expansions_total",
                   {{"task", "metrics-task"}, {"kind", "share"}})
                    .value_or(-1) -
                Sample(leader_page, "tandem_aggregator_expansions_total",
                       {{"task", "metrics-task"}, {"kind", "undo"}})
                    .value_or(-1),
            3)
      << leader_page;
  EXPECT_GT(Sample(leader_page, "tandem_aggregator_expansion_seconds_total",
                   {{"task", "metrics-task"}})
                .value_or(0),
            0);
  // The helper answered the batches and holds the same three.
  EXPECT_EQ(Sample(helper_page, "tandem_aggregator_uploads_total",
                   {{"role", "helper"}, {"code", "OK"}}),
            3)
      << helper_page;
  EXPECT_GE(Sample(helper_page, "tandem_aggregator_verification_batches_total", {{"code", "OK"}})
                .value_or(0),
            1)
      << helper_page;
  EXPECT_EQ(Sample(helper_page, "tandem_aggregator_reports",
                   {{"task", "metrics-task"}, {"state", "accepted"}}),
            3)
      << helper_page;

  // A restarted helper knows the task from its state folder before any call.
  helper->reset();
  auto again = AggregatorDaemon::Start(Config("helper", dir), RealClock::Default(), OpenSslRandom::Default());
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(Sample(HttpGet((*again)->metrics_port(), "/metrics"), "tandem_aggregator_reports",
                   {{"task", "metrics-task"}, {"state", "accepted"}}),
            3);
  leader->reset();
  again->reset();
  std::filesystem::remove_all(dir);
}

TEST(AggregatorMetricsTest, AnonymousTaskNamesDoNotGrowTheLabelSet) {
  RefusalCounters refusals;
  AggregatorMetrics metrics(Role::kHelper, "/nonexistent", /*max_tasks=*/2, &refusals);
  metrics.NoteTask("a");
  metrics.NoteTask("bad/id");
  metrics.NoteTask("b");
  metrics.NoteTask("c");  // over max_tasks
  metrics.NoteTask("a");
  EXPECT_EQ(metrics.KnownTasks(), (std::set<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace tandem::aggregator
