#include "crypto/dp/block_sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "crypto/dp/accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::dp {
namespace {

using ::tandem::testing::StatusIs;

// E_Q[f(L)] by the trapezoid rule over standard normal coordinates (spectrally
// accurate for these smooth Gaussian integrands), for the likelihood ratio
// L = P/Q of one round's output on one or two noise coordinates: L(z1, z2).
struct Divergences {
  double remove = 0;  // D_a(P || Q)
  double add = 0;     // D_a(Q || P)
};

Divergences Integrate(int dims, double order, double hi,
                      const std::function<double(double, double)>& ratio) {
  const double h = 0.1, lo = -12.0;
  std::vector<double> z, w;
  for (double x = lo; x <= hi; x += h) {
    z.push_back(x);
    w.push_back(h * std::exp(-x * x / 2) / std::sqrt(2 * M_PI));
  }
  double e_remove = 0, e_add = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    for (size_t j = 0; j < (dims == 2 ? z.size() : 1); ++j) {
      const double weight = w[i] * (dims == 2 ? w[j] : 1.0);
      const double log_l = std::log(ratio(z[i], dims == 2 ? z[j] : 0.0));
      e_remove += weight * std::exp(order * log_l);
      e_add += weight * std::exp((1 - order) * log_l);
    }
  }
  return {std::log(e_remove) / (order - 1), std::log(e_add) / (order - 1)};
}

// The likelihood ratio of a block whose squared norm is t noise variances.
double BlockRatio(double t, double z) { return std::exp(std::sqrt(t) * z - t / 2); }

// Both directions of the exact divergence, for the norm all in one block
// (the remove direction's worst case), split evenly and unevenly between
// two blocks of a group, and split between two groups, never exceed the
// bound; the one-block remove direction equals the subsampled Gaussian at
// q/m (which checks the quadrature: a bound of rate q/m^2, or one that
// ignored the client sampling, fails here).
TEST(BlockSampling, BoundsEveryDirectionAndSplitOfTheNorm) {
  for (double q : {0.05, 0.5, 1.0}) {
    for (double sigma : {0.8, 2.0}) {
      for (int m : {2, 8}) {
        for (double order : {2.0, 3.5, 6.0}) {
          SCOPED_TRACE(::testing::Message()
                       << "q=" << q << " sigma=" << sigma << " m=" << m << " order=" << order);
          const double t = 1 / (sigma * sigma), inv = 1.0 / m;
          TANDEM_ASSERT_OK_AND_ASSIGN(const double bound,
                                      RdpBlockSampledGaussian(q, sigma, m, order));
          const double hi = order * std::sqrt(t) + 12;
          auto round = [&](double mixture) { return (1 - q) + q * mixture; };
          const Divergences vertex = Integrate(1, order, hi, [&](double z1, double) {
            return round(inv * BlockRatio(t, z1) + (1 - inv));
          });
          const Divergences even = Integrate(2, order, hi, [&](double z1, double z2) {
            return round(inv * (BlockRatio(t / 2, z1) + BlockRatio(t / 2, z2)) + (1 - 2 * inv));
          });
          const Divergences uneven = Integrate(2, order, hi, [&](double z1, double z2) {
            return round(inv * (BlockRatio(0.8 * t, z1) + BlockRatio(0.2 * t, z2)) + (1 - 2 * inv));
          });
          const Divergences groups = Integrate(2, order, hi, [&](double z1, double z2) {
            return round((inv * BlockRatio(t / 2, z1) + 1 - inv) *
                         (inv * BlockRatio(t / 2, z2) + 1 - inv));
          });
          for (const Divergences& d : {vertex, even, uneven, groups}) {
            EXPECT_LE(d.remove, bound * (1 + 1e-9) + 1e-12);
            EXPECT_LE(d.add, bound * (1 + 1e-9) + 1e-12);
          }
          if (order == std::floor(order)) {
            TANDEM_ASSERT_OK_AND_ASSIGN(const double sgm,
                                        RdpSubsampledGaussian(q / m, sigma, order));
            EXPECT_NEAR(vertex.remove, sgm, 1e-7 * sgm);
          }
        }
      }
    }
  }
}

TEST(BlockSampling, OneBlockPerGroupIsTheSubsampledGaussian) {
  for (double order : {1.5, 2.0, 7.0, 64.0}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const double plain, RdpSubsampledGaussian(0.05, 1.0, order));
    TANDEM_ASSERT_OK_AND_ASSIGN(const double one, RdpBlockSampledGaussian(0.05, 1.0, 1, order));
    EXPECT_EQ(one, plain);
  }
}

// The main job's settings (q = 0.05, sigma = 1, d = 1): the amplified
// round is cheaper at every default order, and 20 rounds spend less
// epsilon than without block sampling; never more at any setting.
TEST(BlockSampling, AmplifiesAndNeverCostsMore) {
  for (double order : DefaultOrders()) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const double plain, RdpSubsampledGaussian(0.05, 1.0, order));
    TANDEM_ASSERT_OK_AND_ASSIGN(const double two, RdpBlockSampledGaussian(0.05, 1.0, 2, order));
    TANDEM_ASSERT_OK_AND_ASSIGN(const double four, RdpBlockSampledGaussian(0.05, 1.0, 4, order));
    EXPECT_LT(two, plain) << order;
    EXPECT_LE(four, two) << order;
  }
  for (double q : {0.001, 0.3, 0.99, 1.0}) {
    for (double sigma : {0.3, 1.0, 10.0}) {
      for (double order : {1.25, 3.0, 32.0, 512.0}) {
        TANDEM_ASSERT_OK_AND_ASSIGN(const double plain, RdpSubsampledGaussian(q, sigma, order));
        TANDEM_ASSERT_OK_AND_ASSIGN(const double b, RdpBlockSampledGaussian(q, sigma, 16, order));
        EXPECT_LE(b, plain);
        EXPECT_GE(b, 0.0);
      }
    }
  }
  const std::vector<double> orders = DefaultOrders();
  TANDEM_ASSERT_OK_AND_ASSIGN(
      const PrivacySpent plain,
      ComputeEpsilon(0.05, 1.0, 20, 1e-5, orders, EpsilonConversion::kImproved));
  TANDEM_ASSERT_OK_AND_ASSIGN(const std::vector<double> rdp, ComputeRdp(0.05, 1.0, 20, orders, 2));
  TANDEM_ASSERT_OK_AND_ASSIGN(const PrivacySpent sampled,
                              EpsilonFromRdp(orders, rdp, 1e-5, EpsilonConversion::kImproved));
  EXPECT_LT(sampled.epsilon, 0.8 * plain.epsilon);
}

TEST(BlockSampling, RejectsBadArguments) {
  EXPECT_THAT(RdpBlockSampledGaussian(0.05, 1.0, 0, 2.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RdpBlockSampledGaussian(0.05, 1.0, kMaxBlocksPerGroup + 1, 2.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RdpBlockSampledGaussian(1.5, 1.0, 2, 2.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RdpBlockSampledGaussian(0.05, 0.0, 2, 2.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RdpBlockSampledGaussian(0.05, 1.0, 2, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ComputeRdp(0.05, 1.0, -1, DefaultOrders(), 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ComputeRdp(0.05, 1.0, 20, DefaultOrders(), 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The ledger keeps block sampling per line, charges it as the bound, and
// restores it from a checkpoint; a checkpoint line without the field reads
// as no block sampling.
TEST(BlockSampling, TheAccountantChargesAndRestoresIt) {
  AccountantOptions o;
  o.epsilon_budget = 100;
  TANDEM_ASSERT_OK_AND_ASSIGN(PrivacyAccountant plain, PrivacyAccountant::Create(o));
  TANDEM_ASSERT_OK_AND_ASSIGN(PrivacyAccountant sampled, PrivacyAccountant::Create(o));
  TANDEM_ASSERT_OK(plain.Charge(0.05, 1.0, 10));
  TANDEM_ASSERT_OK(sampled.Charge(0.05, 1.0, 4, 2));
  TANDEM_ASSERT_OK(sampled.Charge(0.05, 1.0, 6, 2));  // merged with the line above
  TANDEM_ASSERT_OK(sampled.Charge(0.05, 1.0, 1));     // a dense round: its own line
  ASSERT_EQ(sampled.ledger().size(), 2u);
  EXPECT_EQ(sampled.ledger()[0].blocks_per_group, 2);
  EXPECT_EQ(sampled.ledger()[0].steps, 10);
  EXPECT_EQ(sampled.ledger()[1].blocks_per_group, 1);
  EXPECT_LT(sampled.SpentEpsilon(), plain.SpentEpsilon());
  TANDEM_ASSERT_OK_AND_ASSIGN(const PrivacyAccountant back,
                              PrivacyAccountant::Deserialize(sampled.Serialize()));
  EXPECT_EQ(back.SpentEpsilon(), sampled.SpentEpsilon());
  EXPECT_EQ(back.ledger()[0].blocks_per_group, 2);
  // Without block sampling the checkpoint is what it always was.
  EXPECT_EQ(plain.Serialize().find("entry ") != std::string::npos, true);
  const std::string text = plain.Serialize();
  const std::string line = text.substr(text.find("entry "));
  EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 3);
  EXPECT_THAT(sampled.Charge(0.05, 1.0, 1, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::dp
