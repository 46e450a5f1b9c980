#include "ml/kernels/fft.h"

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::testing::StatusIs;

std::vector<std::complex<double>> NaiveDft(const std::vector<std::complex<float>>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<std::complex<double>> out(n);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = -2.0 * std::numbers::pi * static_cast<double>((j * k) % n) / n;
      out[k] += std::complex<double>(x[j]) * std::complex<double>(std::cos(a), std::sin(a));
    }
  }
  return out;
}

class FftSizes : public ::testing::TestWithParam<int> {};

TEST_P(FftSizes, ForwardMatchesNaiveDftAndInverseRoundTrips) {
  const int n = GetParam();
  SCOPED_TRACE(n);
  std::mt19937 gen(1234 + n);
  std::normal_distribution<float> dist;
  std::vector<std::complex<float>> x(n);
  for (auto& c : x) c = {dist(gen), dist(gen)};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fft, Fft::Create(n));
  std::vector<std::complex<float>> y = x;
  fft->Forward(y.data());
  const auto ref = NaiveDft(x);
  const double tol = 1e-5 * n;
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(y[k].real(), ref[k].real(), tol) << k;
    EXPECT_NEAR(y[k].imag(), ref[k].imag(), tol) << k;
  }
  fft->Inverse(y.data());
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(y[k].real(), x[k].real(), 1e-5) << k;
    EXPECT_NEAR(y[k].imag(), x[k].imag(), 1e-5) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(PowersOfTwoAndOthers, FftSizes,
                         ::testing::Values(1, 2, 3, 5, 8, 12, 17, 64, 100, 127, 256, 1000));

TEST(Fft, CreateRejectsBadLengths) {
  EXPECT_THAT(Fft::Create(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Fft::Create(-4), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Fft::Create(int64_t{1} << 40), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Fft, ImpulseTransformsToAllOnes) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fft, Fft::Create(7));
  std::vector<std::complex<float>> x(7);
  x[0] = 1.0f;
  fft->Forward(x.data());
  for (const auto& c : x) {
    EXPECT_NEAR(c.real(), 1.0, 1e-6);
    EXPECT_NEAR(c.imag(), 0.0, 1e-6);
  }
}

}  // namespace
}  // namespace tandem::ml::kernels
