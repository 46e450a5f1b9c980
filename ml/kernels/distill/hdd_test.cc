#include "ml/kernels/distill/hdd.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::distill {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

Matrix64 RandomMatrix(int64_t rows, int64_t cols, uint64_t seed, double scale, double shift = 0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, scale);
  Matrix64 m{rows, cols, std::vector<double>(static_cast<size_t>(rows * cols))};
  for (double& v : m.data) v = shift + n(gen);
  return m;
}

std::vector<double> RandomVector(int64_t n, uint64_t seed, double scale) {
  return RandomMatrix(1, n, seed, scale).data;
}

double MaxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class HddCurvature : public ::testing::TestWithParam<double> {};

TEST_P(HddCurvature, Exp0PointsStayOnTheHyperboloid) {
  const double k = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(LorentzModel m, LorentzModel::Create(k));
  for (double scale : {1e-6, 0.1, 1.0, 5.0, 40.0}) {
    const std::vector<double> x = m.Exp0(RandomVector(16, 7, scale));
    EXPECT_NEAR(MinkowskiDot(x, x), -k, 1e-12 * (k + x[0] * x[0])) << scale;
    EXPECT_GT(x[0], 0);
  }
}

TEST_P(HddCurvature, ExpAndLogAreInverse) {
  const double k = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(LorentzModel m, LorentzModel::Create(k));
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::vector<double> x = m.Exp0(RandomVector(8, seed, 0.7));
    // Tangent vector at x: project an ambient one, u + (<x,u>/k) x.
    std::vector<double> u = RandomVector(9, seed + 100, 0.8);
    const double c = MinkowskiDot(x, u) / k;
    for (size_t i = 0; i < u.size(); ++i) u[i] += c * x[i];
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> y, m.Exp(x, u));
    EXPECT_NEAR(MinkowskiDot(y, y), -k, 1e-10 * (k + y[0] * y[0]));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> back, m.Log(x, y));
    EXPECT_LT(MaxDiff(back, u), 1e-8);
    // Geodesic property: d(x, Exp_x(u)) = |u|_L.
    TANDEM_ASSERT_OK_AND_ASSIGN(double d, m.Distance(x, y));
    EXPECT_NEAR(d, std::sqrt(MinkowskiDot(u, u)), 1e-8);
    // And Exp_x(Log_x(z)) = z for another point z.
    const std::vector<double> z = m.Exp0(RandomVector(8, seed + 200, 1.2));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> lz, m.Log(x, z));
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> ez, m.Exp(x, lz));
    EXPECT_LT(MaxDiff(ez, z), 1e-8 * (1 + z[0]));
  }
}

TEST_P(HddCurvature, Log0InvertsExp0AwayFromTheClamps) {
  TANDEM_ASSERT_OK_AND_ASSIGN(LorentzModel m, LorentzModel::Create(GetParam()));
  const std::vector<double> f = RandomVector(12, 3, 0.9);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> back, m.Log0(m.Exp0(f)));
  EXPECT_LT(MaxDiff(back, f), 1e-12);
}

TEST_P(HddCurvature, CentroidIsOnTheManifoldAndExactForOnePoint) {
  const double k = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(LorentzModel m, LorentzModel::Create(k));
  const Matrix64 pts = m.Exp0Rows(RandomMatrix(20, 6, 11, 1.0));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> c, m.Centroid(pts));
  EXPECT_NEAR(MinkowskiDot(c, c), -k, 1e-12 * (k + c[0] * c[0]));
  Matrix64 one{1, pts.cols, std::vector<double>(pts.row(3).begin(), pts.row(3).end())};
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<double> c1, m.Centroid(one));
  EXPECT_LT(MaxDiff(c1, one.data), 1e-12 * (1 + one.data[0]));
}

INSTANTIATE_TEST_SUITE_P(Curvatures, HddCurvature, ::testing::Values(0.5, 1.0, 2.4));

TEST(HddLoss, DistanceIsSymmetricAndZeroForEqualSets) {
  const Matrix64 a = RandomMatrix(30, 10, 1, 0.5), b = RandomMatrix(7, 10, 2, 0.5, 0.3);
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 ab, HddCentroidLoss64(a, b, {.k = 2.0, .lambda = 1}));
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 ba, HddCentroidLoss64(b, a, {.k = 2.0, .lambda = 1}));
  EXPECT_NEAR(ab.distance, ba.distance, 1e-12);
  EXPECT_GT(ab.distance, 0.1);
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 aa, HddCentroidLoss64(a, a, {.k = 2.0, .lambda = 1}));
  EXPECT_LT(aa.distance, 1e-7);  // sqrt(2) * 3.2e-8 from the 1e-15 arcosh clamp
}

TEST(HddLoss, SmallFeaturesGiveEuclideanDistanceOfMeans) {
  // First order: Exp0(f) ~ (sqrt k, f), so d ~ |mean f_r - mean f_s|.
  const Matrix64 a = RandomMatrix(40, 8, 3, 1e-3), b = RandomMatrix(25, 8, 4, 1e-3, 5e-4);
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 l, HddCentroidLoss64(a, b, {.k = 1.0, .lambda = 3}));
  double e2 = 0;
  for (int64_t c = 0; c < 8; ++c) {
    double ma = 0, mb = 0;
    for (int64_t r = 0; r < a.rows; ++r) ma += a.row(r)[c] / a.rows;
    for (int64_t r = 0; r < b.rows; ++r) mb += b.row(r)[c] / b.rows;
    e2 += (ma - mb) * (ma - mb);
  }
  EXPECT_NEAR(l.distance, std::sqrt(e2), 1e-3 * std::sqrt(e2));
  EXPECT_NEAR(l.loss, 3 * l.distance, 1e-15);
}

// Central differences in float64 over every synthetic coordinate.
void ExpectGradientMatchesFiniteDifferences(const Matrix64& real, const Matrix64& syn,
                                            const HddLossOptions& o, double tol) {
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 l, HddCentroidLoss64(real, syn, o));
  const double h = 1e-6;
  for (size_t i = 0; i < syn.data.size(); ++i) {
    Matrix64 p = syn, m = syn;
    p.data[i] += h;
    m.data[i] -= h;
    const double fd = (HddCentroidLoss64(real, p, o)->loss - HddCentroidLoss64(real, m, o)->loss) / (2 * h);
    EXPECT_NEAR(l.grad_synthetic.data[i], fd, tol * (1 + std::fabs(fd))) << "coordinate " << i;
  }
}

TEST(HddLoss, GradientMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences(RandomMatrix(12, 5, 5, 0.8), RandomMatrix(4, 5, 6, 0.8, 0.2),
                                         {.k = 1.0, .lambda = 20}, 1e-6);
  ExpectGradientMatchesFiniteDifferences(RandomMatrix(12, 5, 7, 1.5), RandomMatrix(3, 5, 8, 0.5),
                                         {.k = 2.4, .lambda = 100}, 1e-6);
}

TEST(HddLoss, GradientMatchesFiniteDifferencesWhenThetaIsClamped) {
  // |f| / sqrt k > 10 for every synthetic row: the clamped branch.
  ExpectGradientMatchesFiniteDifferences(RandomMatrix(6, 4, 9, 1.0), RandomMatrix(3, 4, 10, 1.0, 8.0),
                                         {.k = 1.0, .lambda = 1}, 1e-5);
}

TEST(HddLoss, FloatFrontEndMatchesFloat64) {
  const Tensor r = RandomTensor({16, 6}, 1), s = RandomTensor({5, 6}, 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLossResult l, HddCentroidLoss(r, s, {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(HddLoss64 l64, HddCentroidLoss64(*Matrix64::FromTensor(r),
                                                               *Matrix64::FromTensor(s), {}));
  EXPECT_DOUBLE_EQ(l.loss, l64.loss);
  for (size_t i = 0; i < l64.grad_synthetic.data.size(); ++i) {
    EXPECT_FLOAT_EQ(l.grad_synthetic.data()[i], static_cast<float>(l64.grad_synthetic.data[i]));
  }
}

TEST(HddLoss, RejectsBadInput) {
  EXPECT_THAT(LorentzModel::Create(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LorentzModel::Create(NAN), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(LorentzModel m, LorentzModel::Create(1));
  EXPECT_THAT(m.Exp({1.0, 1.0}, {0.0, 1.0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(m.Log({1.0, 0.0}, {1.0, 0.0, 0.0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HddCentroidLoss(RandomTensor({4, 3}, 1), RandomTensor({4, 5}, 2), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HddCentroidLoss(RandomTensor({4, 3}, 1), RandomTensor({4, 3}, 2), {.k = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HddCentroidLoss(RandomTensor({4, 3}, 1), RandomTensor({4, 3}, 2), {.lambda = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HddCentroidLoss(RandomTensor({4}, 1), RandomTensor({4, 3}, 2), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(HddDistill, OneStepIsMomentumSgdOnTheLossGradient) {
  const Tensor real = RandomTensor({2, 10, 4}, 1), syn = RandomTensor({2, 3, 4}, 2, 0.5f);
  const Tensor vel = RandomTensor({2, 3, 4}, 3, 0.1f);
  HddDistillOptions o;
  o.lr = 0.3;
  o.momentum = 0.5;
  TANDEM_ASSERT_OK_AND_ASSIGN(HddDistillResult r, HddDistillStep(real, syn, vel, o));
  double loss = 0;
  for (int64_t c = 0; c < 2; ++c) {
    auto slice = [&](const Tensor& t, int64_t n) {
      std::vector<float> v(t.data().begin() + c * n * 4, t.data().begin() + (c + 1) * n * 4);
      return *Tensor::FromData({n, 4}, std::move(v));
    };
    TANDEM_ASSERT_OK_AND_ASSIGN(HddLossResult l, HddCentroidLoss(slice(real, 10), slice(syn, 3), o.loss));
    loss += l.loss;
    for (int64_t i = 0; i < 12; ++i) {
      const double v = 0.5 * vel.data()[c * 12 + i] + l.grad_synthetic.data()[i];
      EXPECT_NEAR(r.velocity.data()[c * 12 + i], v, 1e-5 * (1 + std::fabs(v)));
      EXPECT_NEAR(r.synthetic.data()[c * 12 + i], syn.data()[c * 12 + i] - 0.3 * v, 1e-5 * (1 + std::fabs(v)));
    }
  }
  EXPECT_NEAR(r.loss, loss, 1e-9 * loss);
}

TEST(HddDistill, LossDecreasesOverSteps) {
  for (int64_t embed_dim : {0, 32}) {
    SCOPED_TRACE(embed_dim);
    const Tensor real = RandomTensor({3, 64, 16}, 5, 0.3f);
    Tensor syn = RandomTensor({3, 4, 16}, 6, 0.6f);
    Tensor vel = *Tensor::Zeros({3, 4, 16});
    HddDistillOptions o;
    o.loss.lambda = 1.0;
    o.lr = 0.15;
    o.embed_dim = embed_dim;
    o.embed_seed = 77;  // a fixed embedding, so losses of different steps compare
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      TANDEM_ASSERT_OK_AND_ASSIGN(HddDistillResult r, HddDistillStep(real, syn, vel, o));
      losses.push_back(r.loss);
      syn = std::move(r.synthetic);
      vel = std::move(r.velocity);
    }
    // Monotone while far from the optimum (a constant step oscillates at the
    // bottom of a distance, whose gradient norm does not vanish).
    for (size_t i = 1; i < 25; ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
    EXPECT_LT(losses.back(), 0.35 * losses.front());
  }
}

TEST(HddDistill, RejectsBadShapesAndOptions) {
  const Tensor real = RandomTensor({2, 5, 4}, 1), syn = RandomTensor({2, 3, 4}, 2);
  EXPECT_THAT(HddDistillStep(real, syn, RandomTensor({2, 3, 5}, 3), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HddDistillStep(RandomTensor({3, 5, 4}, 1), syn, syn, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  HddDistillOptions o;
  o.lr = -1;
  EXPECT_THAT(HddDistillStep(real, syn, syn, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = {};
  o.embed_dim = -2;
  EXPECT_THAT(HddDistillStep(real, syn, syn, o), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::distill
