// The private aggregation path end to end, with the project's own client and
// coordinator code over two real aggregator daemons: float updates ->
// clipping, fixed point, block sampling, DPF keys (client) -> upload with
// retries -> verification, expansion, noise (aggregators) -> decode and
// unbias (coordinator).
#include <cmath>
#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "base/clock.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "client/internal/report_builder.h"
#include "client/transport/grpc_uploader.h"
#include "gtest/gtest.h"
#include "server/core/secure_sum.h"
#include "server/transport/grpc_aggregator_client.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using ::tandem::testing::IsOk;

class PrivateSumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tandem::testing::MakeTempDir("tandem-psum");
    auto pair = tandem::testing::StartAggregatorPair(TANDEM_AGGREGATOR_BIN, dir_);
    ASSERT_THAT(pair, IsOk());
    pair_ = *std::move(pair);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    leader_channel_ = grpc::CreateCustomChannel(pair_.leader_address(),
                                                grpc::InsecureChannelCredentials(), args);
    helper_channel_ = grpc::CreateCustomChannel(pair_.helper_address(),
                                                grpc::InsecureChannelCredentials(), args);
  }
  void TearDown() override {
    pair_ = {};
    std::filesystem::remove_all(dir_);
  }

  // Runs one round with `n` clients whose updates are u_c[i] = f(c, i);
  // returns the decoded aggregate.
  absl::StatusOr<server::DecodedAggregate> RunRound(const server::SecureSum& sum, int n,
                                                    uint64_t round, std::vector<double>* mean) {
    server::GrpcAggregatorClient leader(leader_channel_), helper(helper_channel_);
    if (absl::Status s = sum.Open(leader, helper, round); !s.ok()) return s;
    // What a client learns of the round: its announced parameters.
    const client::ReportParameters rp =
        client::ReportParametersFromRound(sum.RoundParameters(round));
    auto builder = client::ReportBuilder::Create(rp);
    if (!builder.ok()) return builder.status();
    client::GrpcUploader uploader(leader_channel_, helper_channel_, RealClock::Default());
    const uint64_t dim = sum.config().model_dimension;
    mean->assign(dim, 0);
    for (int c = 0; c < n; ++c) {
      std::vector<float> update(dim);
      for (uint64_t i = 0; i < dim; ++i) update[i] = 0.02f * std::sin(0.1f * i + c);
      for (uint64_t i = 0; i < dim; ++i) (*mean)[i] += update[i] / n;
      auto rng = DeterministicRandom::FromSeed(round * 1000 + c);
      auto report = builder->Build(update, rng.get());
      if (!report.ok()) return report.status();
      const client::UploadRequests r =
          client::MakeUploadRequests(*std::move(report), sum.config().task_id, round);
      if (absl::Status s = uploader.Upload(r.to_leader, r.to_helper); !s.ok()) return s;
    }
    return sum.Finalize(leader, helper, round);
  }

  std::string dir_;
  tandem::testing::AggregatorPair pair_;
  std::shared_ptr<grpc::Channel> leader_channel_, helper_channel_;
};

TEST_F(PrivateSumTest, DenseBlocksGiveTheExactMeanWithoutNoise) {
  server::SecureSumConfig cfg;
  cfg.task_id = "dense";
  cfg.model_dimension = 500;  // padded to 512 = 8 groups * 1 block * 64
  cfg.block_size = 64;
  cfg.log_blocks_per_group = 0;
  cfg.clip_l2_norm = 10.0;
  TANDEM_ASSERT_OK_AND_ASSIGN(server::SecureSum sum, server::SecureSum::Create(cfg));
  ASSERT_EQ(sum.padded_dimension(), 512u);
  ASSERT_EQ(sum.blocks_per_group(), 1u);
  ASSERT_EQ(sum.num_groups(), 8u);
  std::vector<double> mean;
  TANDEM_ASSERT_OK_AND_ASSIGN(server::DecodedAggregate agg, RunRound(sum, 12, 1, &mean));
  EXPECT_EQ(agg.reports, 12u);
  for (size_t i = 0; i < mean.size(); ++i) EXPECT_NEAR(agg.mean[i], mean[i], 1e-4) << i;
}

TEST_F(PrivateSumTest, SparseBlocksGiveAnUnbiasedNoisyMean) {
  server::SecureSumConfig cfg;
  cfg.task_id = "sparse";
  cfg.model_dimension = 1000;  // padded to 1024 = 4 groups * 4 blocks * 64
  cfg.block_size = 64;
  cfg.log_blocks_per_group = 2;
  cfg.clip_l2_norm = 1.0;
  cfg.noise_multiplier = 0.5;
  TANDEM_ASSERT_OK_AND_ASSIGN(server::SecureSum sum, server::SecureSum::Create(cfg));
  ASSERT_EQ(sum.blocks_per_group(), 4u);
  ASSERT_EQ(sum.num_groups(), 4u);
  std::vector<double> mean;
  const int n = 40;
  TANDEM_ASSERT_OK_AND_ASSIGN(server::DecodedAggregate agg, RunRound(sum, n, 1, &mean));
  EXPECT_EQ(agg.reports, static_cast<uint64_t>(n));
  // Error per coordinate: sampling (|u| * sqrt(3/n) * ... ) plus noise
  // sqrt(2) * 0.5 * 4 / n; both well below 0.1 on average.
  double err = 0, signal = 0;
  for (size_t i = 0; i < mean.size(); ++i) {
    err += std::abs(agg.mean[i] - mean[i]);
    signal += std::abs(mean[i]);
  }
  EXPECT_LT(err / mean.size(), 0.1);
  // And the noise is really there: not equal to the noiseless estimate.
  int exact = 0;
  for (size_t i = 0; i < mean.size(); ++i) exact += std::abs(agg.mean[i] - mean[i]) < 1e-5;
  EXPECT_LT(exact, static_cast<int>(mean.size()) / 10);
  EXPECT_GT(signal, 0);
}

}  // namespace
}  // namespace tandem
