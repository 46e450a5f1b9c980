#include "ml/kernels/search/ssm_scan.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::search {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

// Seeded random scan inputs in double; A in [-16, -1] and dt around the
// PTrajM init range (softplus^-1 of [1e-3, 0.1]).
struct Inputs {
  ScanDims dims;
  std::vector<double> x, dt, a, b, c, d, bias, h0;
  ScanArgs<double> Args(bool with_h0) const {
    return {x, dt, a, b, c, d, bias, with_h0 ? absl::Span<const double>(h0)
                                             : absl::Span<const double>()};
  }
};

Inputs MakeInputs(const ScanDims& s, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uni(0, 1);
  Inputs in;
  in.dims = s;
  const int64_t rows = s.batch * s.length;
  auto fill = [&](std::vector<double>& v, int64_t n) {
    v.resize(n);
    for (double& e : v) e = normal(gen);
  };
  fill(in.x, rows * s.heads * s.head_dim);
  fill(in.b, rows * s.state_dim);
  fill(in.c, rows * s.state_dim);
  fill(in.d, s.heads);
  fill(in.h0, s.batch * s.heads * s.head_dim * s.state_dim);
  in.dt.resize(rows * s.heads);
  for (double& e : in.dt) e = std::log(std::expm1(1e-3 + 0.5 * uni(gen))) + 0.3 * normal(gen);
  in.a.resize(s.heads);
  for (double& e : in.a) e = -(1 + 15 * uni(gen));
  in.bias.resize(s.heads);
  for (double& e : in.bias) e = 0.1 * normal(gen);
  return in;
}

double MaxDiff(const std::vector<double>& p, const std::vector<double>& q) {
  double m = 0;
  for (size_t i = 0; i < p.size(); ++i) m = std::max(m, std::fabs(p[i] - q[i]));
  return m;
}

TEST(SelectiveScan, ChunkedEqualsNaiveRecurrenceInFloat64) {
  const ScanDims s{2, 37, 3, 5, 6};
  const Inputs in = MakeInputs(s, 7);
  const size_t ny = 2 * 37 * 3 * 5, nh = 2 * 3 * 5 * 6;
  for (bool with_h0 : {false, true}) {
    std::vector<double> y_ref(ny), h_ref(nh);
    TANDEM_ASSERT_OK(SelectiveScanRaw<double>(s, in.Args(with_h0), 0, absl::MakeSpan(y_ref),
                                              absl::MakeSpan(h_ref)));
    for (int64_t chunk : {1, 4, 7, 16, 37, 64}) {
      SCOPED_TRACE(chunk);
      std::vector<double> y(ny), h(nh);
      TANDEM_ASSERT_OK(SelectiveScanRaw<double>(s, in.Args(with_h0), chunk, absl::MakeSpan(y),
                                                absl::MakeSpan(h)));
      EXPECT_LT(MaxDiff(y, y_ref), 1e-10);
      EXPECT_LT(MaxDiff(h, h_ref), 1e-10);
    }
  }
}

TEST(SelectiveScan, ClosedFormForConstantInputs) {
  // N = P = H = 1, x = B = C = 1, constant dt: h_t = delta (1 - r^{t+1}) / (1 - r),
  // r = exp(delta A), y_t = h_t + D.
  const int64_t L = 50;
  const double dt = 0.2, a = -2.0, dskip = 0.5;
  const double delta = std::log1p(std::exp(dt)), r = std::exp(delta * a);
  std::vector<double> ones(L, 1.0), dts(L, dt), av{a}, dv{dskip}, bias{0.0};
  std::vector<double> y(L), h(1);
  const ScanArgs<double> args{ones, dts, av, ones, ones, dv, bias, {}};
  for (int64_t chunk : {0, 8}) {
    TANDEM_ASSERT_OK(SelectiveScanRaw<double>({1, L, 1, 1, 1}, args, chunk, absl::MakeSpan(y),
                                              absl::MakeSpan(h)));
    for (int64_t t = 0; t < L; ++t) {
      EXPECT_NEAR(y[t], delta * (1 - std::pow(r, t + 1)) / (1 - r) + dskip, 1e-12) << t;
    }
  }
}

TEST(SelectiveScan, CarriedStateEqualsOneLongScan) {
  // step-wise decoding: scanning [0, 20) then [20, 45) from the carried state
  // equals one scan over [0, 45).
  const int64_t L = 45, cut = 20, H = 2, P = 4, N = 8;
  const Tensor x = RandomTensor({1, L, H, P}, 1), dt = RandomTensor({1, L, H}, 2, 0.5f),
               b = RandomTensor({1, L, N}, 3), c = RandomTensor({1, L, N}, 4),
               d = RandomTensor({H}, 5);
  const Tensor a = *Tensor::FromData({H}, {-1.5f, -7.0f}), bias = RandomTensor({H}, 6, 0.1f);
  TANDEM_ASSERT_OK_AND_ASSIGN(ScanOutput full, SelectiveScan(x, dt, a, b, c, d, bias));
  auto slice = [](const Tensor& t, int64_t t0, int64_t t1) {
    std::vector<int64_t> shape = t.shape();
    const int64_t inner = t.size() / shape[1];
    shape[1] = t1 - t0;
    std::vector<float> v(t.data().begin() + t0 * inner, t.data().begin() + t1 * inner);
    return *Tensor::FromData(shape, std::move(v));
  };
  TANDEM_ASSERT_OK_AND_ASSIGN(
      ScanOutput first, SelectiveScan(slice(x, 0, cut), slice(dt, 0, cut), a, slice(b, 0, cut),
                                      slice(c, 0, cut), d, bias, {.chunk = 0}));
  TANDEM_ASSERT_OK_AND_ASSIGN(
      ScanOutput second,
      SelectiveScan(slice(x, cut, L), slice(dt, cut, L), a, slice(b, cut, L), slice(c, cut, L), d,
                    bias, {.chunk = 16, .initial_state = &first.state}));
  EXPECT_LT(MaxAbsDiff(slice(full.y, 0, cut), first.y), 1e-5);
  EXPECT_LT(MaxAbsDiff(slice(full.y, cut, L), second.y), 1e-5);
  EXPECT_LT(MaxAbsDiff(full.state, second.state), 1e-5);
}

TEST(SelectiveScan, FloatChunkedMatchesFloatNaive) {
  const Tensor x = RandomTensor({3, 300, 4, 16}, 11), dt = RandomTensor({3, 300, 4}, 12, 0.5f),
               b = RandomTensor({3, 300, 32}, 13), c = RandomTensor({3, 300, 32}, 14),
               d = RandomTensor({4}, 15), bias = RandomTensor({4}, 16, 0.1f);
  const Tensor a = *Tensor::FromData({4}, {-1.0f, -3.0f, -8.0f, -16.0f});
  TANDEM_ASSERT_OK_AND_ASSIGN(ScanOutput naive, SelectiveScan(x, dt, a, b, c, d, bias, {.chunk = 0}));
  TANDEM_ASSERT_OK_AND_ASSIGN(ScanOutput chunked,
                              SelectiveScan(x, dt, a, b, c, d, bias, {.chunk = 64}));
  EXPECT_LT(MaxAbsDiff(naive.y, chunked.y), 1e-4);
  EXPECT_LT(MaxAbsDiff(naive.state, chunked.state), 1e-4);
}

TEST(SelectiveScan, RejectsBadInputs) {
  const Tensor x = RandomTensor({1, 8, 2, 4}, 1), dt = RandomTensor({1, 8, 2}, 2),
               b = RandomTensor({1, 8, 3}, 3), c = RandomTensor({1, 8, 3}, 4),
               d = RandomTensor({2}, 5), bias = RandomTensor({2}, 6);
  const Tensor a = *Tensor::FromData({2}, {-1.0f, -2.0f});
  const Tensor a_pos = *Tensor::FromData({2}, {-1.0f, 0.0f});
  EXPECT_THAT(SelectiveScan(x, dt, a_pos, b, c, d, bias),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("negative")));
  EXPECT_THAT(SelectiveScan(x, RandomTensor({1, 7, 2}, 2), a, b, c, d, bias),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("dt")));
  EXPECT_THAT(SelectiveScan(x, dt, a, b, RandomTensor({1, 8, 4}, 4), d, bias),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("C")));
  EXPECT_THAT(SelectiveScan(x, dt, a, b, c, d, bias, {.chunk = kMaxScanChunk + 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("chunk")));
  Tensor nan_x = x;
  nan_x.mutable_data()[3] = NAN;
  EXPECT_THAT(SelectiveScan(nan_x, dt, a, b, c, d, bias),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("finite")));
  const Tensor bad_h0 = RandomTensor({1, 2, 4, 4}, 9);
  EXPECT_THAT(SelectiveScan(x, dt, a, b, c, d, bias, {.initial_state = &bad_h0}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("initial")));
  if (!CudaDeviceAvailable()) {
    EXPECT_THAT(SelectiveScan(x, dt, a, b, c, d, bias, {.backend = Backend::kCuda}),
                StatusIs(absl::StatusCode::kUnavailable));
  }
}

}  // namespace
}  // namespace tandem::ml::kernels::search
