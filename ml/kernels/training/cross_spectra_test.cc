#include "ml/kernels/training/cross_spectra.h"

#include <array>
#include <cmath>
#include <numbers>
#include <set>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::training {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

std::unique_ptr<CrossSpectra> Make(const CrossSpectraShape& s, uint64_t seed) {
  auto loc = SampleSpectralLocations(s.projections * s.d_out, s.d_in, s.kappa1, seed);
  EXPECT_TRUE(loc.ok()) << loc.status();
  auto cs = CrossSpectra::Create(s, *std::move(loc));
  EXPECT_TRUE(cs.ok()) << cs.status();
  return *std::move(cs);
}

// The defining sum, term by term in double (no FFT, no separability).
std::vector<double> DenseReference(const CrossSpectra& cs, const Tensor& c) {
  const CrossSpectraShape& s = cs.shape();
  const int64_t R = cs.rows(), C = cs.cols();
  std::vector<double> out(static_cast<size_t>(s.layers * R * C), 0.0);
  for (int64_t l = 0; l < s.layers; ++l)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t col = 0; col < C; ++col) {
        double acc = 0;
        for (int64_t w = 0; w < s.kappa2; ++w) {
          const double layer = s.transform == LayerTransform::kDct
                                   ? 0.0
                                   : 2 * std::numbers::pi * w * l / double(s.layers);
          const double dct = std::cos(std::numbers::pi * (2 * l + 1) * w / (2.0 * s.layers));
          for (int64_t n = 0; n < s.kappa1; ++n) {
            const auto [u, v] = cs.locations()[n];
            const double spatial = 2 * std::numbers::pi * (double(u) * r / R + double(v) * col / C);
            const double term = s.transform == LayerTransform::kDct
                                    ? dct * std::cos(spatial)
                                    : std::cos(layer + spatial);
            acc += c.data()[w * s.kappa1 + n] * term;
          }
        }
        out[(l * R + r) * C + col] = s.scale * acc;
      }
  return out;
}

class CrossSpectraTest : public ::testing::TestWithParam<LayerTransform> {};

// Power-of-two and Bluestein (non power-of-two) sizes.
TEST_P(CrossSpectraTest, ForwardMatchesDenseReference) {
  for (const auto& [L, P, dout, din] : std::vector<std::array<int64_t, 4>>{
           {4, 3, 4, 8}, {5, 3, 3, 6}, {3, 1, 7, 5}}) {
    CrossSpectraShape s{.layers = L, .projections = P, .d_out = dout, .d_in = din,
                        .kappa1 = 9, .kappa2 = std::min<int64_t>(L, 3),
                        .transform = GetParam(), .scale = 0.7};
    auto cs = Make(s, 10 + L);
    const Tensor c = RandomTensor({s.kappa2, s.kappa1}, 20 + L);
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dw, cs->Forward(c));
    ASSERT_EQ(dw.shape(), (std::vector<int64_t>{L, P, dout, din}));
    const std::vector<double> ref = DenseReference(*cs, c);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(dw.data()[i], ref[i], 2e-5) << i;
  }
}

// <A c, G> = <c, A^T G> on random inputs, in double from float results.
TEST_P(CrossSpectraTest, AdjointIdentity) {
  CrossSpectraShape s{.layers = 6, .projections = 3, .d_out = 8, .d_in = 12, .kappa1 = 20,
                      .kappa2 = 4, .transform = GetParam(), .scale = 1.3};
  auto cs = Make(s, 3);
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const Tensor c = RandomTensor({4, 20}, 100 + seed);
    const Tensor g = RandomTensor({6, 3, 8, 12}, 200 + seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor ac, cs->Forward(c));
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor atg, cs->Adjoint(g));
    double lhs = 0, rhs = 0, norm = 0;
    for (int64_t i = 0; i < ac.size(); ++i) {
      lhs += double{ac.data()[i]} * g.data()[i];
      norm += std::fabs(double{ac.data()[i]} * g.data()[i]);
    }
    for (int64_t i = 0; i < c.size(); ++i) rhs += double{c.data()[i]} * atg.data()[i];
    EXPECT_NEAR(lhs, rhs, 1e-5 * norm) << seed;
  }
}

// Loss 1/2 ||A c - T||^2 has gradient A^T (A c - T): central differences.
TEST_P(CrossSpectraTest, AdjointIsTheGradient) {
  CrossSpectraShape s{.layers = 4, .projections = 3, .d_out = 4, .d_in = 6, .kappa1 = 6,
                      .kappa2 = 2, .transform = GetParam(), .scale = 0.5};
  auto cs = Make(s, 4);
  const Tensor target = RandomTensor({4, 3, 4, 6}, 5);
  Tensor c = RandomTensor({2, 6}, 6);
  auto loss = [&](const Tensor& coeffs) {
    const Tensor dw = *cs->Forward(coeffs);
    double l = 0;
    for (int64_t i = 0; i < dw.size(); ++i) l += 0.5 * std::pow(dw.data()[i] - target.data()[i], 2);
    return l;
  };
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dw, cs->Forward(c));
  for (int64_t i = 0; i < dw.size(); ++i) dw.mutable_data()[i] -= target.data()[i];
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor grad, cs->Adjoint(dw));
  for (int64_t k = 0; k < c.size(); ++k) {
    const float h = 1e-2f, c0 = c.data()[k];
    c.mutable_data()[k] = c0 + h;
    const double up = loss(c);
    c.mutable_data()[k] = c0 - h;
    const double down = loss(c);
    c.mutable_data()[k] = c0;
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(grad.data()[k], fd, 2e-3 * (1 + std::fabs(fd))) << k;
  }
}

TEST_P(CrossSpectraTest, OneLayerFrequencyGivesTheSameDeltaInEveryLayer) {
  CrossSpectraShape s{.layers = 5, .projections = 3, .d_out = 4, .d_in = 4, .kappa1 = 7,
                      .kappa2 = 1, .transform = GetParam()};
  auto cs = Make(s, 8);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dw, cs->Forward(RandomTensor({1, 7}, 9)));
  const int64_t slice = 3 * 4 * 4;
  for (int64_t l = 1; l < 5; ++l)
    for (int64_t i = 0; i < slice; ++i) EXPECT_EQ(dw.data()[l * slice + i], dw.data()[i]);
}

INSTANTIATE_TEST_SUITE_P(Transforms, CrossSpectraTest,
                         ::testing::Values(LayerTransform::kDft, LayerTransform::kDct));

// A single coefficient is a pure plane wave of exactly its frequency.
TEST(CrossSpectra, SingleCoefficientIsAPlaneWave) {
  CrossSpectraShape s{.layers = 8, .projections = 1, .d_out = 8, .d_in = 16, .kappa1 = 1,
                      .kappa2 = 3, .transform = LayerTransform::kDft, .scale = 2.0};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto cs, CrossSpectra::Create(s, {{3, 5}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor c, Tensor::FromData({3, 1}, {0.0f, 0.0f, 1.5f}));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor dw, cs->Forward(c));
  for (int64_t l = 0; l < 8; ++l)
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t col = 0; col < 16; ++col) {
        const double want =
            3.0 * std::cos(2 * std::numbers::pi * (2.0 * l / 8 + 3.0 * r / 8 + 5.0 * col / 16));
        EXPECT_NEAR(dw.data()[(l * 8 + r) * 16 + col], want, 1e-5);
      }
}

TEST(CrossSpectra, LocationsAreDistinctInRangeAndSeeded) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SpectralLocations a, SampleSpectralLocations(12, 10, 120, 1));
  std::set<std::pair<int64_t, int64_t>> all(a.begin(), a.end());
  EXPECT_EQ(all.size(), 120u);  // kappa1 = rows * cols takes every cell once
  TANDEM_ASSERT_OK_AND_ASSIGN(SpectralLocations b, SampleSpectralLocations(300, 200, 50, 7));
  TANDEM_ASSERT_OK_AND_ASSIGN(SpectralLocations b2, SampleSpectralLocations(300, 200, 50, 7));
  TANDEM_ASSERT_OK_AND_ASSIGN(SpectralLocations b3, SampleSpectralLocations(300, 200, 50, 8));
  EXPECT_EQ(b, b2);
  EXPECT_NE(b, b3);
  for (const auto& [u, v] : b) {
    EXPECT_GE(u, 0);
    EXPECT_LT(u, 300);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 200);
  }
}

TEST(CrossSpectra, RejectsBadArguments) {
  const CrossSpectraShape ok{.layers = 2, .projections = 3, .d_out = 2, .d_in = 2, .kappa1 = 1,
                             .kappa2 = 2};
  EXPECT_THAT(SampleSpectralLocations(2, 2, 5, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SampleSpectralLocations(2, 2, 0, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  CrossSpectraShape bad = ok;
  bad.kappa2 = 3;  // > layers
  EXPECT_THAT(CrossSpectra::Create(bad, {{0, 0}}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CrossSpectra::Create(ok, {{6, 0}}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CrossSpectra::Create(ok, {{0, 0}, {0, 0}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto cs, CrossSpectra::Create(ok, {{5, 1}}));
  EXPECT_THAT(cs->Forward(RandomTensor({1, 2}, 1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cs->Adjoint(RandomTensor({2, 3, 2, 3}, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::training
