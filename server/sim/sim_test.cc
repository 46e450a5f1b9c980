// A short private federation on sklearn digits through two real aggregator
// daemons: it learns, every participant's report is counted, the upload
// baselines are those of the model's D, and the report folder is written; and
// a deep CNN with top-norm block selection and error feedback.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/data/dataset.h"
#include "server/sim/federation.h"
#include "server/sim/private_mean.h"
#include "server/sim/report.h"
#include "server/sim/sim_models.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem::sim {
namespace {

using ::tandem::testing::IsOk;

// The sklearn digits split and both aggregator daemons, started as tandem-sim
// starts them: TLS, roles, tickets and `policy`. Owns the temporary folder.
struct DigitsAndPair {
  ml::Dataset train, test;
  std::string dir;
  std::optional<tandem::testing::AggregatorPair> pair;

  AggregatorEndpoints Endpoints() const {
    return {pair->leader_address(), pair->helper_address(), pair->leader_collector_address(),
            pair->helper_collector_address(), dir};
  }
};

// A round's baselines (server/core/upload_baselines.h) for FedAvg's full
// update of the federation's model: 4 D bytes per participant in clear,
// 4 D + 16 as dense sharing at 32 bits (tens of clients' sum and the noise
// fit in 32 bits: server::ValueBitsFor).
void ExpectBaselines(const FederationOptions& o, const ml::Dataset& train, const RoundRecord& r) {
  auto model = MakeSimModel(o.model, train.features.cols(), o.hidden, train.num_classes);
  ASSERT_THAT(model, IsOk());
  const uint64_t d = (*model)->num_params();
  const uint64_t n = r.participants;
  EXPECT_EQ(r.clear_bytes_up, n * 4 * d) << r.round;
  EXPECT_EQ(r.dense_bytes_up, n * (4 * d + 16)) << r.round;
  EXPECT_GT(r.bytes_up, 0u) << r.round;
}

void LoadDigits(DigitsAndPair* out) {
  auto all = ml::LoadDigitsCsv();
  ASSERT_THAT(all, IsOk()) << "install the data with deploy/install-deps.sh";
  auto split = ml::TrainTestSplit(*all, 0.25, 3);
  ASSERT_THAT(split, IsOk());
  out->train = std::move(split->first);
  out->test = std::move(split->second);
}

// Starts out's pair (the data already loaded).
void StartPair(const std::string& name, const std::string& policy, DigitsAndPair* out) {
  out->dir = tandem::testing::MakeTempDir(name);
  ASSERT_THAT(tandem::testing::MakeRoleCertificates(out->dir), IsOk());
  tandem::testing::AggregatorPairOptions po;
  po.certs_dir = out->dir;
  po.ticket_public_key = out->dir + "/ticket.pub";
  po.policy = policy;
  auto pair = tandem::testing::StartAggregatorPair(TANDEM_AGGREGATOR_BIN, out->dir + "/state", po);
  ASSERT_THAT(pair, IsOk());
  out->pair.emplace(*std::move(pair));
}

void StartDigitsAndPair(const std::string& name, const std::string& policy, DigitsAndPair* out) {
  ASSERT_NO_FATAL_FAILURE(LoadDigits(out));
  ASSERT_NO_FATAL_FAILURE(StartPair(name, policy, out));
}

TEST(Simulator, PrivateFederationOnDigitsLearnsAndReports) {
  DigitsAndPair env;
  ASSERT_NO_FATAL_FAILURE(
      StartDigitsAndPair("tandem-simtest",
                         "min_noise_multiplier: 0.05 min_batch_size: 1 require_norm_proofs: false "
                         "sampling_rate: 0.75 epsilon_budget: inf",
                         &env));
  const std::string& dir = env.dir;

  FederationOptions o;
  o.name = "fedavg-preamble-dp";
  o.rounds = 6;
  o.clients = 8;
  // The per-class split this test's accuracy floor was set on (8 clients:
  // the redraws always succeed).
  o.partition = "dirichlet";
  o.sample_rate = 0.75;
  o.local_steps = 15;
  o.block_size = 64;
  o.log_blocks_per_group = 1;
  o.noise_multiplier = 0.05;  // tiny cohorts: little noise, large epsilon
  o.crypto_seed = 11;
  o.clip_l2_norm = 2.0;
  int calls = 0;
  auto records =
      RunFederation(o, env.train, env.test, env.Endpoints(), [&](const RoundRecord&) { ++calls; });
  ASSERT_THAT(records, IsOk());
  ASSERT_EQ(records->size(), 6u);
  EXPECT_EQ(calls, 6);
  for (const RoundRecord& r : *records) {
    EXPECT_EQ(r.accepted_reports, static_cast<uint64_t>(r.participants)) << r.round;
    ExpectBaselines(o, env.train, r);
    EXPECT_GT(r.epsilon, 0);
  }
  EXPECT_GT(records->back().epsilon, records->front().epsilon);
  // Chance is 0.1; six rounds of private FedAvg on digits get far above it
  // (about 0.7 here, 0.8 in the clear).
  EXPECT_GT(records->back().test_accuracy, 0.5);

  ASSERT_THAT(WriteReport(dir + "/report", "test", *records), IsOk());
  std::ifstream html(dir + "/report/report.html");
  std::string page((std::istreambuf_iterator<char>(html)), {});
  EXPECT_THAT(page, ::testing::HasSubstr("<svg"));
  EXPECT_THAT(page, ::testing::HasSubstr("fedavg-preamble-dp"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/report/metrics.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/report/metrics.json"));
  std::filesystem::remove_all(dir);
}

// A deep CNN (8x8 digits) with top-norm block selection: a quarter of the
// blocks sent, the rest carried as each client's error feedback, norm
// proofs on (the clipped selected blocks must pass the aggregators' check).
TEST(Simulator, TopNormDeepCnnReportsAreAllAccepted) {
  DigitsAndPair env;
  ASSERT_NO_FATAL_FAILURE(
      StartDigitsAndPair("tandem-simtest-topnorm",
                         "min_noise_multiplier: 0.05 min_batch_size: 1 require_norm_proofs: true "
                         "sampling_rate: 0.75 epsilon_budget: inf",
                         &env));
  const std::string& dir = env.dir;

  FederationOptions o;
  o.name = "fedavg-preamble-dp-topnorm";
  o.model = "deep_cnn";
  o.rounds = 3;
  o.clients = 6;
  o.partition = "iid";
  o.sample_rate = 0.75;
  o.local_steps = 10;
  o.block_size = 64;
  o.blocks_fraction = 0.25;
  o.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  o.norm_proofs = true;
  o.noise_multiplier = 0.05;
  o.crypto_seed = 12;
  auto records = RunFederation(o, env.train, env.test, env.Endpoints(), nullptr);
  ASSERT_THAT(records, IsOk());
  ASSERT_EQ(records->size(), 3u);
  for (const RoundRecord& r : *records) {
    EXPECT_EQ(r.accepted_reports, static_cast<uint64_t>(r.participants)) << r.round;
    ExpectBaselines(o, env.train, r);
    EXPECT_TRUE(std::isfinite(r.test_loss)) << r.round;
  }
  std::filesystem::remove_all(dir);
}

// --max_upload_vs_dense and --target_epsilon against real daemons: the d
// and noise they set run, the uploads stay within dense sharing's bytes
// (plus each report's ticket and signatures), epsilon ends on the target
// from below, and the aggregators' policy floor still binds: one just above
// the calibrated noise refuses the rounds.
TEST(Simulator, UploadCapAndTargetEpsilonRunAgainstRealAggregators) {
  DigitsAndPair data;
  ASSERT_NO_FATAL_FAILURE(LoadDigits(&data));
  FederationOptions o;
  o.name = "fedavg-preamble-dp";
  o.rounds = 3;
  o.clients = 8;
  o.partition = "iid";
  o.sample_rate = 0.75;
  o.local_steps = 10;
  o.block_size = 64;
  o.norm_proofs = true;
  o.crypto_seed = 13;
  auto model = MakeSimModel(o.model, data.train.features.cols(), o.hidden, data.train.num_classes);
  ASSERT_THAT(model, IsOk());
  const uint64_t dim = (*model)->num_params();
  ASSERT_THAT(ApplySimTargets(/*max_upload_vs_dense=*/1.0, /*target_epsilon=*/30, dim, &o), IsOk());
  EXPECT_GE(o.log_blocks_per_group, 2u);  // with proofs d = 1 sends more than dense sharing
  EXPECT_EQ(o.epsilon_budget, 30);
  for (const bool floor_above : {false, true}) {
    const double floor = floor_above ? o.noise_multiplier * (1 + 1e-6) : o.noise_multiplier;
    DigitsAndPair env;
    env.train = data.train;
    env.test = data.test;
    ASSERT_NO_FATAL_FAILURE(StartPair(
        floor_above ? "tandem-simtest-floor" : "tandem-simtest-targets",
        absl::StrFormat("min_noise_multiplier: %.17g min_batch_size: 1 require_norm_proofs: true "
                        "sampling_rate: 0.75 epsilon_budget: inf",
                        floor),
        &env));
    auto records = RunFederation(o, env.train, env.test, env.Endpoints(), nullptr);
    if (floor_above) {
      EXPECT_THAT(records.status(), ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                                ::testing::HasSubstr("noise")));
    } else {
      ASSERT_THAT(records, IsOk());
      ASSERT_EQ(records->size(), 3u);
      for (const RoundRecord& r : *records) {
        EXPECT_EQ(r.accepted_reports, static_cast<uint64_t>(r.participants)) << r.round;
        EXPECT_LE(r.bytes_up, r.dense_bytes_up + r.participants * 1024) << r.round;
        EXPECT_LE(r.epsilon, 30) << r.round;
      }
      EXPECT_GT(records->back().epsilon, 30 - 1e-3);
    }
    std::filesystem::remove_all(env.dir);
  }
}

}  // namespace
}  // namespace tandem::sim

namespace tandem::sim {
namespace {

// tandem-sim's client split at the scale PartitionDirichlet's redraws could
// not reach (1,000+ clients at alpha 0.3 on Fashion-MNIST-sized data).
TEST(SplitClients, EveryPartitionAtThousandsOfClients) {
  ml::Dataset train;
  train.num_classes = 10;
  for (int i = 0; i < 60000; ++i) train.labels.push_back((i * 7) % 10);
  FederationOptions o;
  o.clients = 3000;
  o.dirichlet_alpha = 0.3;
  for (const char* partition : {"mixture", "iid", "quantity"}) {
    o.partition = partition;
    o.size_sigma = 1.0;
    absl::StatusOr<ml::Partition> p = SplitClients(o, train);
    ASSERT_THAT(p, ::tandem::testing::IsOk()) << partition;
    ASSERT_EQ(p->size(), 3000u);
    size_t total = 0;
    for (const auto& c : *p) {
      EXPECT_GE(c.size(), 10u) << partition;
      total += c.size();
    }
    EXPECT_EQ(total, 60000u) << partition;
  }
  o.partition = "dirichlet";  // the per-class split with redraws gives up here
  EXPECT_FALSE(SplitClients(o, train).ok());
  o.partition = "bogus";
  EXPECT_THAT(SplitClients(o, train).status(),
              ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::sim
