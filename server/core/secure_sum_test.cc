// SecureSum's round parameters: the noise variance the aggregators read back
// as exactly the configured multiplier (their policy floor compares it), and
// the minimum batch.
#include "server/core/secure_sum.h"

#include <cmath>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::server {
namespace {

// What an aggregator computes (aggregator/core/policy.h NoiseMultiplierOf).
double MultiplierSeenByAggregator(const proto::RoundParameters& p) {
  if (p.noise_variance() == 0) return 0;
  const double delta =
      p.has_norm_bound() ? std::sqrt(static_cast<double>(p.norm_bound().max_l2_squared()))
                         : p.fixed_point().clip_l2_norm() *
                               std::ldexp(1.0, static_cast<int>(p.fixed_point().fractional_bits()));
  return std::sqrt(p.noise_variance()) / delta;
}

SecureSumConfig Config(double z, double clip, int frac_bits, bool proofs) {
  SecureSumConfig c;
  c.task_id = "t";
  c.model_dimension = 1000;
  c.block_size = 64;
  c.log_blocks_per_group = 2;
  c.frac_bits = frac_bits;
  c.clip_l2_norm = clip;
  c.noise_multiplier = z;
  c.norm_proofs = proofs;
  c.min_batch_size = 10;
  return c;
}

TEST(SecureSum, NoiseVarianceGivesTheAggregatorsExactlyTheMultiplier) {
  int checked = 0, exact = 0;
  for (bool proofs : {true, false}) {
    for (double z : {0.3, 0.5, 0.7, 1.0, 1.1, 1.3, 2.0, 2.7, 4.1}) {
      for (double clip : {0.1, 1.0, 2.0, 3.7}) {
        for (int f : {8, 12, 16, 20}) {
          TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sum, SecureSum::Create(Config(z, clip, f, proofs)));
          const proto::RoundParameters p = sum.RoundParameters(1, 1000);
          ASSERT_EQ(p.has_norm_bound(), proofs);
          EXPECT_GT(p.noise_variance(), 0);
          const double seen = MultiplierSeenByAggregator(p);
          // Never below z (a server with floor z would refuse it), and z to
          // the last bit where a double gives it (sqrt(v) / Delta can step
          // over z: then one ulp above).
          EXPECT_GE(seen, z) << z << " " << clip << " " << f << " " << proofs;
          EXPECT_LE(seen, std::nextafter(z, 10.0)) << z << " " << clip << " " << f << " " << proofs;
          exact += seen == z;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 9 * 4 * 4);
  EXPECT_GE(exact, checked * 9 / 10) << exact << " of " << checked << " exact";
  // The default multiplier reads back exactly in the default encodings.
  for (double clip : {1.0, 2.0}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sum, SecureSum::Create(Config(1.0, clip, 16, true)));
    EXPECT_EQ(MultiplierSeenByAggregator(sum.RoundParameters(1)), 1.0) << clip;
  }
}

TEST(SecureSum, NormRoundsUseTheProvenBoundNotTheClip) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sum, SecureSum::Create(Config(1.0, 1.0, 16, true)));
  const proto::RoundParameters p = sum.RoundParameters(3, 1000);
  // The bound includes fixed-point rounding: above (C * 2^f)^2, so the
  // variance is above the clip-based one.
  EXPECT_GT(p.norm_bound().max_l2_squared(), uint64_t{1} << 32);
  const double bound = static_cast<double>(p.norm_bound().max_l2_squared());
  EXPECT_NEAR(p.noise_variance() / bound, 1.0, 1e-12);
  EXPECT_EQ(p.dp().min_batch_size(), 10u);
  EXPECT_EQ(p.dp().noise_multiplier(), 1.0);
}

TEST(SecureSum, NoNoiseIsZeroVariance) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sum, SecureSum::Create(Config(0, 1.0, 16, true)));
  EXPECT_EQ(sum.RoundParameters(1).noise_variance(), 0);
  EXPECT_THAT(SecureSum::Create(Config(-1, 1.0, 16, true)).status(),
              ::tandem::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

// An aggregator whose released share is a fixed vector.
class FixedShareAggregator : public AggregatorClient {
 public:
  explicit FixedShareAggregator(std::vector<uint64_t> share) : share_(std::move(share)) {}
  absl::StatusOr<proto::OpenRoundResponse> OpenRound(const proto::RoundParameters&) override {
    return proto::OpenRoundResponse();
  }
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest&) override {
    proto::FinalizeResponse r;
    r.set_accepted_reports(2);
    proto::Tensor* t = r.mutable_aggregate_share();
    t->set_dtype(proto::DTYPE_UINT64);
    t->add_shape(static_cast<int64_t>(share_.size()));
    t->set_data(std::string(reinterpret_cast<const char*>(share_.data()), share_.size() * 8));
    return r;
  }

 private:
  std::vector<uint64_t> share_;
};

TEST(SecureSum, TopNormSumsAreNotRescaledRandomOnesAre) {
  for (const proto::BlockSelection sel :
       {proto::BLOCK_SELECTION_RANDOM, proto::BLOCK_SELECTION_TOP_NORM}) {
    SecureSumConfig c = Config(0, 1.0, 16, false);
    c.block_selection = sel;
    TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sum, SecureSum::Create(c));
    EXPECT_EQ(sum.RoundParameters(1).block_selection(), sel);
    // Leader's share: 0.5 at coordinate 3 (2^15), helper's: -0.25 there.
    std::vector<uint64_t> a(sum.padded_dimension(), 0), b(sum.padded_dimension(), 0);
    a[3] = uint64_t{1} << 15;
    b[3] = ~uint64_t{0} - (uint64_t{1} << 14) + 1;
    FixedShareAggregator leader(a), helper(b);
    TANDEM_ASSERT_OK_AND_ASSIGN(DecodedAggregate agg, sum.Finalize(leader, helper, 1));
    const double scale = sel == proto::BLOCK_SELECTION_TOP_NORM ? 1.0 : 4.0;  // 2^d, d = 2
    EXPECT_NEAR(agg.sum[3], 0.25 * scale, 1e-6);
    EXPECT_NEAR(agg.mean[3], 0.25 * scale / 2, 1e-6);
    EXPECT_EQ(agg.sum[4], 0.0f);
  }
  SecureSumConfig bad = Config(0, 1.0, 16, false);
  bad.block_selection = static_cast<proto::BlockSelection>(5);
  EXPECT_FALSE(SecureSum::Create(bad).ok());
}

}  // namespace
}  // namespace tandem::server
