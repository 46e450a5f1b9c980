#include "crypto/dp/discrete_gaussian.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dp/internal/buffered_random.h"
#include "crypto/dp/internal/cks20.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::dp {
namespace {

using internal::SampleBernoulliExpMinus;
using internal::SampleDiscreteLaplace;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kSeed = 20200401;  // Fixed seed for every statistical test.

class FailingRandom : public SecureRandom {
 public:
  absl::Status Fill(absl::Span<uint8_t>) override { return absl::InternalError("rng down"); }
};

// Exact pmf of N_Z(0, s2) (or of the discrete Laplace when laplace_t > 0)
// on [-range, range], normalised over that range (the mass outside is below
// 1e-300 for the ranges used here).
std::map<int64_t, double> ExactPmf(double s2, int64_t range, double laplace_t = 0) {
  std::map<int64_t, double> pmf;
  double z = 0;
  for (int64_t x = -range; x <= range; ++x) {
    const double dx = static_cast<double>(x);
    const double w =
        laplace_t > 0 ? std::exp(-std::fabs(dx) / laplace_t) : std::exp(-dx * dx / (2 * s2));
    pmf[x] = w;
    z += w;
  }
  for (auto& [x, p] : pmf) p /= z;
  return pmf;
}

// Chi-square statistic of `counts` against `pmf`, merging the tails so
// every bin expects >= 10 draws. Returns {statistic, degrees of freedom}.
std::pair<double, int> ChiSquare(const std::map<int64_t, int64_t>& counts,
                                 const std::map<int64_t, double>& pmf, int64_t n) {
  std::vector<std::pair<double, double>> bins;  // (observed, expected)
  double obs = 0, exp = 0;
  for (const auto& [x, p] : pmf) {
    auto it = counts.find(x);
    obs += it == counts.end() ? 0 : static_cast<double>(it->second);
    exp += p * static_cast<double>(n);
    if (exp >= 10) {
      bins.push_back({obs, exp});
      obs = exp = 0;
    }
  }
  if (!bins.empty()) {  // Fold the right tail into the last bin.
    bins.back().first += obs;
    bins.back().second += exp;
  }
  int64_t in_range = 0;
  for (const auto& [x, c] : counts) {
    if (pmf.count(x)) in_range += c;
  }
  EXPECT_EQ(in_range, n) << "draws outside the tabulated range";
  double chi2 = 0;
  for (const auto& [o, e] : bins) chi2 += (o - e) * (o - e) / e;
  return {chi2, static_cast<int>(bins.size()) - 1};
}

// Upper 1e-4 quantile of chi-square(df), Wilson-Hilferty approximation.
double ChiSquareCritical(int df) {
  const double z = 3.719;  // standard normal upper 1e-4 quantile
  const double k = df;
  const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * c * c * c;
}

struct Moments {
  double mean = 0, var = 0;
};
Moments ExactMoments(const std::map<int64_t, double>& pmf) {
  Moments m;
  for (const auto& [x, p] : pmf) m.var += p * static_cast<double>(x) * static_cast<double>(x);
  return m;  // Symmetric: mean 0.
}

TEST(VarianceFromDouble, ExactForBinaryFractions) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Rational r, VarianceFromDouble(0.25));
  EXPECT_EQ(r.num, 1u);
  EXPECT_EQ(r.den, 4u);
  TANDEM_ASSERT_OK_AND_ASSIGN(r, VarianceFromDouble(3.0));
  EXPECT_EQ(r.num, 3u);
  EXPECT_EQ(r.den, 1u);
  TANDEM_ASSERT_OK_AND_ASSIGN(r, VarianceFromDouble(0.1));  // 0x1.999999999999ap-4
  EXPECT_EQ(r.num, 3602879701896397u);
  EXPECT_EQ(r.den, uint64_t{1} << 55);
  EXPECT_EQ(static_cast<double>(r.num) / static_cast<double>(r.den), 0.1);
  TANDEM_ASSERT_OK_AND_ASSIGN(r, VarianceFromDouble(std::ldexp(1.0, 62)));
  EXPECT_EQ(r.num, uint64_t{1} << 62);
  EXPECT_EQ(r.den, 1u);
}

TEST(VarianceFromDouble, RoundsTinyValuesToTwoToTheMinus62) {
  TANDEM_ASSERT_OK_AND_ASSIGN(const Rational r, VarianceFromDouble(1e-15));
  EXPECT_LE(r.den, uint64_t{1} << 62);
  EXPECT_NEAR(static_cast<double>(r.num) / static_cast<double>(r.den), 1e-15, std::ldexp(1.0, -62));
}

TEST(VarianceFromDouble, RejectsInvalidValues) {
  for (double bad :
       std::vector<double>{0.0, -1.0, std::nan(""), HUGE_VAL, std::ldexp(1.0, 63), 1e-300}) {
    EXPECT_THAT(VarianceFromDouble(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("variance")))
        << bad;
  }
}

TEST(DiscreteGaussianSampler, CreateValidates) {
  auto rng = DeterministicRandom::FromSeed(kSeed);
  EXPECT_THAT(DiscreteGaussianSampler::Create({0, 1}, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma^2")));
  EXPECT_THAT(DiscreteGaussianSampler::Create({1, 0}, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma^2")));
  EXPECT_THAT(DiscreteGaussianSampler::Create({kMaxRationalPart, 1}, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2^63")));
  EXPECT_THAT(DiscreteGaussianSampler::Create({1, 1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null")));
}

TEST(DiscreteGaussianSampler, LaplaceScaleIsFloorSigmaPlusOne) {
  auto rng = DeterministicRandom::FromSeed(kSeed);
  const std::vector<std::pair<Rational, uint64_t>> cases = {{{1, 1}, 2},
                                                            {{3, 4}, 1},
                                                            {{4, 1}, 3},
                                                            {{99, 1}, 10},
                                                            {{100, 1}, 11},
                                                            {{kMaxRationalPart - 1, 1}, 3037000500},
                                                            {{1, kMaxRationalPart - 1}, 1}};
  for (const auto& [s2, t] : cases) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto s, DiscreteGaussianSampler::Create(s2, rng.get()));
    EXPECT_EQ(s->laplace_scale(), t) << s2.num << "/" << s2.den;
  }
}

TEST(BernoulliExpMinus, MatchesExpMinusGammaForRationalGamma) {
  SCOPED_TRACE(absl::StrCat("seed ", kSeed));
  auto rng = DeterministicRandom::FromSeed(kSeed);
  internal::BufferedRandom r(rng.get());
  constexpr int kN = 100000;
  const std::vector<Rational> gammas = {{1, 3},
                                        {1, 2},
                                        {1, 1},
                                        {3, 2},
                                        {7, 3},
                                        {5, 1},
                                        // 3/2 with 40-bit parts: same distribution.
                                        {3ull << 40, 2ull << 40}};
  for (const Rational& g : gammas) {
    int ones = 0;
    for (int i = 0; i < kN; ++i) {
      TANDEM_ASSERT_OK_AND_ASSIGN(const bool b, SampleBernoulliExpMinus(g, r));
      ones += b;
    }
    const double p = std::exp(-static_cast<double>(g.num) / static_cast<double>(g.den));
    const double se = std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(static_cast<double>(ones) / kN, p, 5 * se) << g.num << "/" << g.den;
  }
}

TEST(BernoulliExpMinus, EdgeCasesAreExact) {
  auto rng = DeterministicRandom::FromSeed(kSeed);
  internal::BufferedRandom r(rng.get());
  for (int i = 0; i < 1000; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const bool b, SampleBernoulliExpMinus({0, 7}, r));
    EXPECT_TRUE(b);  // exp(0) = 1
  }
  int ones = 0;
  for (int i = 0; i < 1000; ++i) {  // exp(-1000): essentially never.
    TANDEM_ASSERT_OK_AND_ASSIGN(const bool b, SampleBernoulliExpMinus({1000, 1}, r));
    ones += b;
  }
  EXPECT_EQ(ones, 0);
  EXPECT_THAT(SampleBernoulliExpMinus({1, 0}, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("denominator")));
}

TEST(DiscreteLaplace, ChiSquareAgainstExactPmf) {
  SCOPED_TRACE(absl::StrCat("seed ", kSeed));
  auto rng = DeterministicRandom::FromSeed(kSeed);
  internal::BufferedRandom r(rng.get());
  constexpr uint64_t kT = 3;
  constexpr int64_t kN = 100000;
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < kN; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const int64_t x, SampleDiscreteLaplace(kT, r));
    ++counts[x];
  }
  const auto pmf = ExactPmf(0, 200, kT);
  const auto [chi2, df] = ChiSquare(counts, pmf, kN);
  EXPECT_LT(chi2, ChiSquareCritical(df)) << "df " << df;
  EXPECT_THAT(SampleDiscreteLaplace(0, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scale")));
  EXPECT_THAT(SampleDiscreteLaplace(uint64_t{1} << 32, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scale")));
}

// Distribution tests for N_Z(0, sigma^2) at several rational variances.
class DiscreteGaussianDistributionTest : public ::testing::TestWithParam<Rational> {};

TEST_P(DiscreteGaussianDistributionTest, MomentsTailAndChiSquareMatchExactPmf) {
  const Rational s2 = GetParam();
  const double sigma2 = static_cast<double>(s2.num) / static_cast<double>(s2.den);
  const double sigma = std::sqrt(sigma2);
  SCOPED_TRACE(absl::StrCat("seed ", kSeed, " sigma^2 ", s2.num, "/", s2.den));
  auto rng = DeterministicRandom::FromSeed(kSeed + s2.num);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteGaussianSampler::Create(s2, rng.get()));
  constexpr int64_t kN = 100000;
  std::vector<int64_t> draws(kN);
  ASSERT_THAT(sampler->SampleInto(absl::MakeSpan(draws)), IsOk());

  const int64_t range = static_cast<int64_t>(40 * sigma) + 40;
  const auto pmf = ExactPmf(sigma2, range);
  const Moments exact = ExactMoments(pmf);
  std::map<int64_t, int64_t> counts;
  double sum = 0, sum2 = 0;
  int64_t tail = 0;
  for (int64_t x : draws) {
    ++counts[x];
    sum += static_cast<double>(x);
    sum2 += static_cast<double>(x) * static_cast<double>(x);
    if (std::fabs(static_cast<double>(x)) >= 2 * sigma) ++tail;
  }
  // Mean within 5 standard errors; variance within 5 standard errors of the
  // sample variance (sd of s^2 ~ var * sqrt(2 / n) for a near-Gaussian).
  const double mean = sum / kN;
  const double var = sum2 / kN - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5 * std::sqrt(exact.var / kN));
  EXPECT_NEAR(var, exact.var, 5 * exact.var * std::sqrt(2.0 / kN));
  // Tail mass P[|X| >= 2 sigma] within 5 binomial standard errors.
  double p_tail = 0;
  for (const auto& [x, p] : pmf) {
    if (std::fabs(static_cast<double>(x)) >= 2 * sigma) p_tail += p;
  }
  EXPECT_NEAR(static_cast<double>(tail) / kN, p_tail, 5 * std::sqrt(p_tail * (1 - p_tail) / kN));
  // Chi-square goodness of fit at significance 1e-4.
  const auto [chi2, df] = ChiSquare(counts, pmf, kN);
  EXPECT_LT(chi2, ChiSquareCritical(df)) << "df " << df;
}

INSTANTIATE_TEST_SUITE_P(RationalVariances, DiscreteGaussianDistributionTest,
                         ::testing::Values(Rational{1, 4}, Rational{1, 1}, Rational{9, 4},
                                           Rational{10, 1}, Rational{1000, 3}));

TEST(DiscreteGaussianSampler, LargeSigmaMoments) {
  SCOPED_TRACE(absl::StrCat("seed ", kSeed));
  constexpr int64_t kN = 20000;
  for (const Rational s2 : {Rational{uint64_t{1} << 40, 1}, Rational{uint64_t{1} << 60, 1},
                            Rational{(uint64_t{1} << 62) + 12345, 3}}) {
    auto rng = DeterministicRandom::FromSeed(kSeed);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteGaussianSampler::Create(s2, rng.get()));
    const double sigma2 = static_cast<double>(s2.num) / static_cast<double>(s2.den);
    long double sum = 0, sum2 = 0;
    int64_t beyond_3sigma = 0;
    for (int64_t i = 0; i < kN; ++i) {
      TANDEM_ASSERT_OK_AND_ASSIGN(const int64_t x, sampler->Sample());
      sum += x;
      sum2 += static_cast<long double>(x) * x;
      if (std::fabs(static_cast<double>(x)) > 3 * std::sqrt(sigma2)) ++beyond_3sigma;
    }
    const double mean = static_cast<double>(sum / kN);
    const double var = static_cast<double>(sum2 / kN) - mean * mean;
    // At this scale the discrete Gaussian's variance equals sigma^2 to
    // within exp(-2 pi^2 sigma^2) [CKS20, Prop. 19].
    EXPECT_NEAR(mean, 0.0, 5 * std::sqrt(sigma2 / kN));
    EXPECT_NEAR(var / sigma2, 1.0, 5 * std::sqrt(2.0 / kN));
    const double p3 = std::erfc(3 / std::sqrt(2.0));  // 0.0027
    EXPECT_NEAR(static_cast<double>(beyond_3sigma) / kN, p3, 5 * std::sqrt(p3 / kN));
  }
}

TEST(DiscreteGaussianSampler, DeterministicUnderSeedAndSeedSensitive) {
  auto a = DeterministicRandom::FromSeed(7);
  auto b = DeterministicRandom::FromSeed(7);
  auto c = DeterministicRandom::FromSeed(8);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto sa, DiscreteGaussianSampler::Create({50, 1}, a.get()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto sb, DiscreteGaussianSampler::Create({50, 1}, b.get()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto sc, DiscreteGaussianSampler::Create({50, 1}, c.get()));
  std::vector<int64_t> xa(64), xb(64), xc(64);
  ASSERT_THAT(sa->SampleInto(absl::MakeSpan(xa)), IsOk());
  ASSERT_THAT(sb->SampleInto(absl::MakeSpan(xb)), IsOk());
  ASSERT_THAT(sc->SampleInto(absl::MakeSpan(xc)), IsOk());
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
}

TEST(DiscreteGaussianSampler, GeneratorFailureIsInternal) {
  FailingRandom bad;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, DiscreteGaussianSampler::Create({4, 1}, &bad));
  EXPECT_THAT(s->Sample(), StatusIs(absl::StatusCode::kInternal, HasSubstr("rng down")));
  std::vector<uint64_t> share(4, 0);
  EXPECT_THAT(AddDiscreteGaussianNoise({4, 1}, absl::MakeSpan(share), &bad),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rng down")));
}

TEST(AddDiscreteGaussianNoise, AddsSamplerOutputModuloTwoToThe64) {
  const Rational s2{10000, 1};
  std::vector<uint64_t> share = {0, ~uint64_t{0}, 5, uint64_t{1} << 63};
  std::vector<uint64_t> original = share;
  for (int i = 0; i < 60; ++i) original.push_back(0), share.push_back(0);
  auto rng = DeterministicRandom::FromSeed(kSeed);
  ASSERT_THAT(AddDiscreteGaussianNoise(s2, absl::MakeSpan(share), rng.get()), IsOk());
  // Replaying the same seed gives the noise that was added.
  auto replay = DeterministicRandom::FromSeed(kSeed);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteGaussianSampler::Create(s2, replay.get()));
  bool saw_negative = false;
  for (size_t i = 0; i < share.size(); ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const int64_t noise, sampler->Sample());
    saw_negative |= noise < 0;
    EXPECT_EQ(share[i], original[i] + static_cast<uint64_t>(noise)) << i;
    EXPECT_EQ(static_cast<int64_t>(share[i] - original[i]), noise);
  }
  EXPECT_TRUE(saw_negative);
}

TEST(AddDiscreteGaussianNoise, TwoNoisedSharesDecodeToSignedSumPlusSmallNoise) {
  // x = -1234 secret-shared over Z_2^64; each server noises its own share.
  auto rng = DeterministicRandom::FromSeed(kSeed);
  std::vector<uint64_t> s0 = {0x0123456789abcdefull}, s1 = {static_cast<uint64_t>(-1234) - s0[0]};
  ASSERT_THAT(AddDiscreteGaussianNoise({100, 1}, absl::MakeSpan(s0), rng.get()), IsOk());
  ASSERT_THAT(AddDiscreteGaussianNoise({100, 1}, absl::MakeSpan(s1), rng.get()), IsOk());
  const int64_t decoded = static_cast<int64_t>(s0[0] + s1[0]);
  EXPECT_NE(decoded, -1234);  // Noise was added (P[both zero] ~ 0.0016; fixed seed).
  EXPECT_NEAR(decoded, -1234, 10 * std::sqrt(200.0));
}

// Shares longer than kNoiseChunk: chunks from their own streams keyed from
// `random`, run by the caller's runner (the aggregator's runs them on every
// core: each chunk touches its own coordinates and stream). The noise is the
// same for a seed in whatever order the chunks run,
// differs between chunks and seeds, and has the distribution's moments.
TEST(AddDiscreteGaussianNoise, ChunkedNoiseIsRunnerIndependentAndGaussian) {
  const Rational s2{10000, 1};  // sigma = 100
  const size_t n = 3 * kNoiseChunk + 123;
  const auto in_order = [](size_t k, absl::FunctionRef<void(size_t)> body) {
    for (size_t i = 0; i < k; ++i) body(i);
  };
  const auto reversed = [](size_t k, absl::FunctionRef<void(size_t)> body) {
    for (size_t i = k; i > 0; --i) body(i - 1);
  };
  const auto evens_first = [](size_t k, absl::FunctionRef<void(size_t)> body) {
    for (size_t i = 0; i < k; i += 2) body(i);
    for (size_t i = 1; i < k; i += 2) body(i);
  };
  const auto noised = [&](ChunkRunner run, uint64_t seed) {
    std::vector<uint64_t> share(n, 0);
    auto rng = DeterministicRandom::FromSeed(seed);
    EXPECT_THAT(AddDiscreteGaussianNoise(s2, absl::MakeSpan(share), rng.get(), run), IsOk());
    return share;
  };
  const std::vector<uint64_t> one = noised(in_order, kSeed);
  EXPECT_EQ(noised(reversed, kSeed), one);
  EXPECT_EQ(noised(evens_first, kSeed), one);
  {  // The form without a runner: the same chunks, in order.
    std::vector<uint64_t> share(n, 0);
    auto rng = DeterministicRandom::FromSeed(kSeed);
    ASSERT_THAT(AddDiscreteGaussianNoise(s2, absl::MakeSpan(share), rng.get()), IsOk());
    EXPECT_EQ(share, one);
  }
  EXPECT_NE(noised(in_order, kSeed + 1), one);
  // No two chunks repeat each other.
  for (size_t c = 1; c < 4; ++c) {
    const size_t len = std::min(kNoiseChunk, n - c * kNoiseChunk);
    EXPECT_FALSE(std::equal(one.begin(), one.begin() + len, one.begin() + c * kNoiseChunk));
  }
  double sum = 0, sum2 = 0;
  for (uint64_t x : one) {
    const double v = static_cast<double>(static_cast<int64_t>(x));
    sum += v;
    sum2 += v * v;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // 24,699 draws: the mean's sd is 100 / 157 = 0.64, the variance's ~0.9 %.
  EXPECT_NEAR(mean, 0.0, 4 * 0.64);
  EXPECT_NEAR(var, 10000.0, 10000.0 * 0.045);
  // A failing generator fails the call before any chunk runs.
  FailingRandom bad;
  std::vector<uint64_t> share(n, 0);
  EXPECT_THAT(AddDiscreteGaussianNoise(s2, absl::MakeSpan(share), &bad, in_order),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rng down")));
  EXPECT_EQ(share, std::vector<uint64_t>(n, 0));
}

TEST(NoiseShareForRelease, RefusesSmallBatchesAndLeavesShareUntouched) {
  auto rng = DeterministicRandom::FromSeed(kSeed);
  std::vector<uint64_t> share(16, 42);
  const ReleasePolicy policy{{100, 1}, 10};
  EXPECT_THAT(NoiseShareForRelease(policy, 9, absl::MakeSpan(share), rng.get()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("minimum of 10")));
  EXPECT_EQ(share, std::vector<uint64_t>(16, 42));
  EXPECT_THAT(NoiseShareForRelease({{100, 1}, 0}, 100, absl::MakeSpan(share), rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_batch_size")));
  EXPECT_THAT(NoiseShareForRelease({{0, 1}, 1}, 100, absl::MakeSpan(share), rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma^2")));
  ASSERT_THAT(NoiseShareForRelease(policy, 10, absl::MakeSpan(share), rng.get()), IsOk());
  EXPECT_NE(share, std::vector<uint64_t>(16, 42));
}

}  // namespace
}  // namespace tandem::dp
