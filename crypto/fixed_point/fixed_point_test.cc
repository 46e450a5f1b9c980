// Fixed-point codec: rounding, clipping, two's complement, sums of many
// encodings, and the overflow margin enforced by Create().
#include "crypto/fixed_point/fixed_point.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

TEST(FixedPointCodec, RoundsToNearestTiesAwayFromZero) {
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedPointCodec c, FixedPointCodec::Create(2, 100.0, 1));
  // 2 fractional bits: step 0.25.
  const std::vector<float> x = {1.25f, -1.25f, 0.125f, -0.125f, 0.1f, -0.3f, 0.0f};
  std::vector<uint64_t> out(x.size());
  TANDEM_ASSERT_OK_AND_ASSIGN(double factor, c.Encode(x, absl::MakeSpan(out)));
  EXPECT_EQ(factor, 1.0);
  EXPECT_EQ(out[0], 5u);
  EXPECT_EQ(out[1], static_cast<uint64_t>(-5));
  EXPECT_EQ(out[2], 1u);                             // 0.5 -> 1
  EXPECT_EQ(out[3], static_cast<uint64_t>(-1));      // -0.5 -> -1
  EXPECT_EQ(out[4], 0u);                             // 0.4 -> 0
  EXPECT_EQ(out[5], static_cast<uint64_t>(-1));      // -1.2 -> -1
  EXPECT_EQ(out[6], 0u);
  std::vector<double> back(x.size());
  ASSERT_THAT(c.Decode(out, absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back[0], 1.25);
  EXPECT_EQ(back[1], -1.25);
  EXPECT_EQ(back[5], -0.25);
}

TEST(FixedPointCodec, RoundHalfAwayFromZeroIsLlround) {
  // Ties of both signs, the doubles next to them, values whose w + 0.5
  // would round up in floating point, both sides of 2^52 and 2^53, signed
  // zeros, then random doubles of every magnitude up to 2^62.
  std::vector<double> cases = {0.0,
                               -0.0,
                               0.5,
                               -0.5,
                               1.5,
                               -1.5,
                               2.5,
                               -2.5,
                               0.49999999999999994,
                               -0.49999999999999994,
                               4503599627370495.5,
                               -4503599627370495.5,
                               4503599627370496.0,
                               9007199254740993.0,
                               -9007199254740993.0,
                               4611686018427387904.0,
                               -4611686018427387904.0};
  for (double tie = 0.5; tie < 1e6; tie = tie * 3 + 1) {
    for (double w : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, 1e300)}) {
      cases.push_back(w);
      cases.push_back(-w);
    }
  }
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 62);
  for (int i = 0; i < 200000; ++i) cases.push_back(std::ldexp(unit(gen), exponent(gen)));
  for (double w : cases) {
    ASSERT_EQ(RoundHalfAwayFromZero(w), std::llround(w)) << std::hexfloat << w;
  }
}

TEST(FixedPointCodec, ClipsToL2Norm) {
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedPointCodec c, FixedPointCodec::Create(20, 1.0, 10));
  const std::vector<float> x = {3.0f, -4.0f};
  std::vector<uint64_t> out(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(double factor, c.Encode(x, absl::MakeSpan(out)));
  EXPECT_DOUBLE_EQ(factor, 0.2);
  std::vector<double> back(2);
  ASSERT_THAT(c.Decode(out, absl::MakeSpan(back)), IsOk());
  EXPECT_NEAR(back[0], 0.6, c.step());
  EXPECT_NEAR(back[1], -0.8, c.step());
}

TEST(FixedPointCodec, SumOfManyEncodingsDecodesWithinQuantisationError) {
  for (int bits : {32, 64}) {
    const int f = bits == 64 ? 24 : 12;
    const uint64_t n = 200;
    TANDEM_ASSERT_OK_AND_ASSIGN(FixedPointCodec c, FixedPointCodec::Create(f, 2.0, n, bits));
    std::mt19937_64 gen(bits);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t dim = 64;
    std::vector<uint64_t> acc(dim, 0), enc(dim);
    std::vector<double> expected(dim, 0);
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : 0xffffffffULL;
    for (uint64_t i = 0; i < n; ++i) {
      std::vector<float> x(dim);
      for (float& v : x) v = normal(gen);
      TANDEM_ASSERT_OK_AND_ASSIGN(double factor, c.Encode(x, absl::MakeSpan(enc)));
      for (size_t j = 0; j < dim; ++j) {
        acc[j] = (acc[j] + enc[j]) & mask;
        expected[j] += static_cast<double>(x[j]) * factor;
      }
    }
    std::vector<double> back(dim);
    ASSERT_THAT(c.Decode(acc, absl::MakeSpan(back)), IsOk());
    for (size_t j = 0; j < dim; ++j) {
      EXPECT_NEAR(back[j], expected[j], n * c.step() / 2 + 1e-9) << bits << " " << j;
    }
  }
}

TEST(FixedPointCodec, WorstCaseSumAtTheMarginDoesNotWrap) {
  // Largest n the margin allows for C = 1, f = 20, 32-bit: n*(2^20+1) < 2^31.
  const uint64_t n_max = ((uint64_t{1} << 31) - 1) / ((uint64_t{1} << 20) + 1);
  EXPECT_THAT(FixedPointCodec::Create(20, 1.0, n_max + 1, 32),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedPointCodec c, FixedPointCodec::Create(20, 1.0, n_max, 32));
  for (float sign : {1.0f, -1.0f}) {
    std::vector<uint64_t> enc(1);
    ASSERT_THAT(c.Encode(std::vector<float>{sign * 5.0f}, absl::MakeSpan(enc)).status(), IsOk());
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n_max; ++i) acc = (acc + enc[0]) & 0xffffffffULL;
    std::vector<double> back(1);
    ASSERT_THAT(c.Decode(std::vector<uint64_t>{acc}, absl::MakeSpan(back)), IsOk());
    EXPECT_DOUBLE_EQ(back[0], sign * static_cast<double>(n_max));
  }
}

TEST(FixedPointCodec, RejectsBadParametersAndInputs) {
  EXPECT_THAT(FixedPointCodec::Create(-1, 1, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(53, 1, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(8, 0, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(8, std::nan(""), 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(8, 1, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(8, 1, 1, 16), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FixedPointCodec::Create(40, 1e6, 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedPointCodec c, FixedPointCodec::Create(8, 1, 1));
  std::vector<uint64_t> out(2);
  EXPECT_THAT(c.Encode(std::vector<float>{1.0f}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(c.Encode(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()},
                       absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(c.Encode(std::vector<float>{1.0f, std::numeric_limits<float>::infinity()},
                       absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<double> back(1);
  EXPECT_THAT(c.Decode(out, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto
