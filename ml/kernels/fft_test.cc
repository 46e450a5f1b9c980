#include "ml/kernels/fft.h"

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <thread>
#include <tuple>
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

std::vector<std::complex<float>> RandomSignal(int n, int seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<std::complex<float>> x(n);
  for (auto& c : x) c = {dist(gen), dist(gen)};
  return x;
}

class FftSizes : public ::testing::TestWithParam<std::tuple<int, FftImpl>> {};

TEST_P(FftSizes, ForwardMatchesNaiveDftAndInverseRoundTrips) {
  const auto [n, impl] = GetParam();
  SCOPED_TRACE(n);
  const std::vector<std::complex<float>> x = RandomSignal(n, 1234 + n);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fft, Fft::Create(n, impl));
  EXPECT_EQ(fft->impl(), impl);
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

INSTANTIATE_TEST_SUITE_P(
    PowersOfTwoAndOthers, FftSizes,
    ::testing::Combine(::testing::Values(1, 2, 3, 5, 8, 12, 17, 64, 100, 127, 256, 997, 1000),
                       ::testing::Values(FftImpl::kFftw, FftImpl::kReference)));

// FFTW (the default) against the reference implementation, element-wise,
// with a tolerance relative to the spectrum's scale (|X_k| ~ sqrt(n)).
class FftwVsReference : public ::testing::TestWithParam<int> {};

TEST_P(FftwVsReference, ForwardAndInverseAgree) {
  const int n = GetParam();
  SCOPED_TRACE(n);
  const std::vector<std::complex<float>> x = RandomSignal(n, 99 + n);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fftw, Fft::Create(n));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto ref, Fft::Create(n, FftImpl::kReference));
  ASSERT_EQ(fftw->impl(), FftImpl::kFftw);
  std::vector<std::complex<float>> a = x, b = x;
  fftw->Forward(a.data());
  ref->Forward(b.data());
  const double tol = 1e-5 * std::sqrt(static_cast<double>(n)) * std::log2(n + 1.0) + 1e-6;
  for (int k = 0; k < n; ++k) {
    ASSERT_NEAR(a[k].real(), b[k].real(), tol) << k;
    ASSERT_NEAR(a[k].imag(), b[k].imag(), tol) << k;
  }
  fftw->Inverse(a.data());
  ref->Inverse(b.data());
  const double rt_tol = 1e-5 * std::log2(n + 1.0) + 1e-6;
  for (int k = 0; k < n; ++k) {
    ASSERT_NEAR(a[k].real(), x[k].real(), rt_tol) << k;  // inverse(forward(x)) == x
    ASSERT_NEAR(a[k].imag(), x[k].imag(), rt_tol) << k;
    ASSERT_NEAR(a[k].real(), b[k].real(), rt_tol) << k;
    ASSERT_NEAR(a[k].imag(), b[k].imag(), rt_tol) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(ManySizes, FftwVsReference,
                         ::testing::Values(1, 2, 4, 7, 16, 31, 97, 128, 360, 997, 1000, 1024, 4000,
                                           4096, 7919, 65536));

// Rows of a tensor start at any float offset; FFTW's aligned plan must not be
// used on them (the cache keeps an FFTW_UNALIGNED plan for that case).
TEST(Fftw, MisalignedBufferMatchesAligned) {
  const int n = 1024;
  const std::vector<std::complex<float>> x = RandomSignal(n, 5);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto fft, Fft::Create(n));
  std::vector<std::complex<float>> aligned = x;
  std::vector<float> raw(2 * n + 1);
  auto* misaligned = reinterpret_cast<std::complex<float>*>(raw.data() + 1);
  for (int k = 0; k < n; ++k) misaligned[k] = x[k];
  fft->Forward(aligned.data());
  fft->Forward(misaligned);
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(misaligned[k].real(), aligned[k].real(), 1e-4) << k;
    EXPECT_NEAR(misaligned[k].imag(), aligned[k].imag(), 1e-4) << k;
  }
}

// Concurrent Create (planner under the cache mutex) and shared execution.
TEST(Fftw, ConcurrentCreateAndExecute) {
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures] {
      for (int n : {500 + t, 1000, 2048, 4000}) {
        auto fft = Fft::Create(n);
        if (!fft.ok()) {
          ++failures[t];
          continue;
        }
        const std::vector<std::complex<float>> x = RandomSignal(n, t);
        std::vector<std::complex<float>> y = x;
        (*fft)->Forward(y.data());
        (*fft)->Inverse(y.data());
        for (int k = 0; k < n; ++k) {
          if (std::abs(y[k] - x[k]) > 1e-4f) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << t;
}

TEST(Fft, CreateRejectsBadLengths) {
  EXPECT_THAT(Fft::Create(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Fft::Create(-4), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Fft::Create(int64_t{1} << 40), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Fft::Create(0, FftImpl::kReference), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Fft, ImpulseTransformsToAllOnes) {
  for (FftImpl impl : {FftImpl::kFftw, FftImpl::kReference}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto fft, Fft::Create(7, impl));
    std::vector<std::complex<float>> x(7);
    x[0] = 1.0f;
    fft->Forward(x.data());
    for (const auto& c : x) {
      EXPECT_NEAR(c.real(), 1.0, 1e-6);
      EXPECT_NEAR(c.imag(), 0.0, 1e-6);
    }
  }
}

}  // namespace
}  // namespace tandem::ml::kernels
