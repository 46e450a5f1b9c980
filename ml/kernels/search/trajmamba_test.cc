#include "ml/kernels/search/trajmamba.h"

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::search {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;
constexpr double kPi = std::numbers::pi, kDeg = kPi / 180, kR = 6371.0088;

// Seeded random-walk trajectories near Chengdu (104.06 E, 30.67 N), 15 s
// sampling, ~10 m/s, random road ids; lengths[b] valid points of lmax.
TrajBatch RandomBatch(std::vector<int64_t> lengths, int64_t lmax, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0, 1);
  const int64_t batch = static_cast<int64_t>(lengths.size());
  TrajBatch t{*Tensor::Zeros({batch, lmax, 2}), *Tensor::Zeros({batch, lmax}),
              *Tensor::Zeros({batch, lmax}), lengths};
  for (int64_t b = 0; b < batch; ++b) {
    double lon = 104.06 + 0.01 * n(gen), lat = 30.67 + 0.01 * n(gen), time = 1.7e9 + 1e4 * b;
    double heading = n(gen);
    for (int64_t i = 0; i < lmax; ++i) {
      t.gps.mutable_data()[(b * lmax + i) * 2] = static_cast<float>(lon);
      t.gps.mutable_data()[(b * lmax + i) * 2 + 1] = static_cast<float>(lat);
      t.times.mutable_data()[b * lmax + i] = static_cast<float>(time);
      t.roads.mutable_data()[b * lmax + i] = static_cast<float>(gen() % vocab);
      heading += 0.3 * n(gen);
      const double step_km = 0.15 * (1 + 0.2 * n(gen));
      lon += step_km * std::cos(heading) / (kR * kDeg * std::cos(lat * kDeg));
      lat += step_km * std::sin(heading) / (kR * kDeg);
      time += 16;
    }
  }
  return t;
}

TrajMambaConfig SmallConfig() {
  TrajMambaConfig c;
  c.d_model = 16;
  c.d_state = 8;
  c.head_dim = 8;
  c.layers = 2;
  c.road_vocab = 50;
  c.chunk = 4;
  return c;
}

TEST(TrajFeatures, StraightLineAndConstantTurnClosedForms) {
  // Points on a regular polygon walked counter-clockwise: equal chords
  // (speed = chord / dt), zero acceleration, turn = 2 pi / sides each step.
  const int64_t len = 12, sides = 24;
  // Near (0.5, 0.5) degrees float32 resolves ~6 mm (near 104 E only ~0.8 m).
  const double lat0 = 0.5, lon0 = 0.5, radius_km = 0.5, dt = 10;
  std::vector<float> ll, times;
  for (int64_t i = 0; i < len; ++i) {
    const double ang = 2 * kPi * i / sides;
    const double x = radius_km * std::cos(ang) - radius_km, y = radius_km * std::sin(ang);
    ll.push_back(static_cast<float>(lon0 + x / (kR * kDeg * std::cos(lat0 * kDeg))));
    ll.push_back(static_cast<float>(lat0 + y / (kR * kDeg)));
    times.push_back(static_cast<float>(6 * 3600 + dt * i));  // Thursday 06:00 UTC
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(PointFeatures f, ComputePointFeatures(ll, times, len));
  const double chord_m = 2000 * radius_km * std::sin(kPi / sides);
  for (int64_t i = 2; i < len; ++i) {
    const float* g = f.gps.ptr() + i * kGpsFeatures;
    EXPECT_NEAR(g[2], chord_m / dt / 10, 2e-3) << i;   // speed / 10 m/s
    EXPECT_NEAR(g[3], 0.0, 2e-3) << i;                 // acceleration
    EXPECT_NEAR(g[4], 2.0 / sides, 2e-3) << i;         // turn / pi
  }
  EXPECT_EQ(f.gps.data()[2], 0.0f);  // the first point has no speed
  EXPECT_NEAR(f.road_aux.data()[0], 1.0, 1e-6);  // sin(2 pi * 0.25)
  EXPECT_NEAR(f.road_aux.data()[1], 0.0, 1e-6);
  EXPECT_NEAR(f.road_aux.data()[2], std::sin(2 * kPi * 3 / 7), 1e-6);  // Thursday = 3
  EXPECT_NEAR(f.road_aux.data()[3], std::cos(2 * kPi * 3 / 7), 1e-6);
}

TEST(TrajFeatures, RejectsInvalidFixes) {
  std::vector<float> ll = {104, 30, 104, 95}, t = {0, 1};
  EXPECT_THAT(ComputePointFeatures(ll, t, 2), StatusIs(absl::StatusCode::kInvalidArgument));
  ll[3] = 30;
  t = {5, 1};
  EXPECT_THAT(ComputePointFeatures(ll, t, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("decrease")));
  EXPECT_THAT(ComputePointFeatures(ll, t, 3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TrajMamba, PaddingDoesNotChangeEmbeddings) {
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(SmallConfig(), 3));
  const TrajBatch padded = RandomBatch({10, 16}, 16, 50, 9);
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding e, TrajMambaEncode(w, padded));
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajBatch alone, CompressBatch(padded, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
                                                                      {0}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding a, TrajMambaEncode(w, alone));
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(e.embeddings.data()[i], a.embeddings.data()[i]) << i;
  for (int64_t i = 10 * 16; i < 16 * 16; ++i) EXPECT_EQ(e.points.data()[i], 0.0f);
  double norm = 0;
  for (float v : e.embeddings.data()) norm += v * v;
  EXPECT_GT(norm, 1e-3);
}

TEST(TrajMamba, ChunkedAndNaiveScanGiveTheSameEncoder) {
  TrajMambaConfig c = SmallConfig();
  const TrajBatch batch = RandomBatch({33, 20, 7}, 33, 50, 4);
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(c, 5));
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding chunked, TrajMambaEncode(w, batch));
  w.config.chunk = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding naive, TrajMambaEncode(w, batch));
  EXPECT_LT(MaxAbsDiff(chunked.points, naive.points), 1e-4);
}

TEST(TrajMamba, PointStatesAreCausal) {
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(SmallConfig(), 6));
  TrajBatch batch = RandomBatch({24}, 24, 50, 8);
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding before, TrajMambaEncode(w, batch));
  batch.roads.mutable_data()[23] = 1 + batch.roads.data()[23] == 50 ? 0 : 1 + batch.roads.data()[23];
  batch.gps.mutable_data()[2 * 23] += 0.001f;
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding after, TrajMambaEncode(w, batch));
  const int64_t d = 16;
  double changed_last = 0;
  for (int64_t t = 0; t < 24; ++t) {
    for (int64_t i = 0; i < d; ++i) {
      const double diff = std::fabs(before.points.data()[t * d + i] - after.points.data()[t * d + i]);
      if (t < 23) EXPECT_LT(diff, 1e-6) << t;
      else changed_last += diff;
    }
  }
  EXPECT_GT(changed_last, 1e-3);
}

TEST(TrajMamba, RejectsBadBatches) {
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(SmallConfig(), 1));
  TrajBatch b = RandomBatch({5}, 5, 50, 1);
  b.roads.mutable_data()[2] = 50;
  EXPECT_THAT(TrajMambaEncode(w, b), StatusIs(absl::StatusCode::kInvalidArgument,
                                              ::testing::HasSubstr("road id")));
  b = RandomBatch({5}, 5, 50, 1);
  b.lengths = {6};
  EXPECT_THAT(TrajMambaEncode(w, b), StatusIs(absl::StatusCode::kInvalidArgument));
  TrajMambaWeights broken = w;
  broken.gps.layers[1].w_out = RandomTensor({3, 3}, 1);
  EXPECT_THAT(TrajMambaEncode(broken, RandomBatch({5}, 5, 50, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("w_out")));
  TrajMambaConfig bad = SmallConfig();
  bad.head_dim = 5;
  EXPECT_THAT(TrajMambaWeights::Random(bad, 1), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TrajMask, KeepingEveryPointReproducesTheTeacherEmbedding) {
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(SmallConfig(), 2));
  const TrajBatch batch = RandomBatch({9, 6}, 9, 50, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding teacher, TrajMambaEncode(w, batch));
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajBatch all, CompressBatch(batch, {{0, 1, 2, 3, 4, 5, 6, 7, 8},
                                                                   {0, 1, 2, 3, 4, 5}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding student, TrajMambaEncode(w, all));
  EXPECT_EQ(MaxAbsDiff(teacher.embeddings, student.embeddings), 0.0);
}

TEST(TrajMask, GradientMatchesFiniteDifferences) {
  const int64_t len = 11, d = 6, hidden = 5;
  const Tensor points = RandomTensor({len, d}, 1), teacher = RandomTensor({d}, 2, 0.3f);
  TANDEM_ASSERT_OK_AND_ASSIGN(MaskGeneratorWeights w, MaskGeneratorWeights::Random(d, hidden, 3));
  const MaskLossOptions o{.keep_ratio = 0.3, .lambda = 0.7};
  TANDEM_ASSERT_OK_AND_ASSIGN(MaskLoss l, MaskGeneratorLoss(w, points, teacher, o));
  const float eps = 1e-3f;
  for (auto [param, grad] : {std::pair{&w.w1, &l.grad.w1}, {&w.b1, &l.grad.b1},
                             {&w.w2, &l.grad.w2}, {&w.b2, &l.grad.b2}}) {
    for (int64_t i = 0; i < param->size(); ++i) {
      const float keep = param->data()[i];
      param->mutable_data()[i] = keep + eps;
      const double up = MaskGeneratorLoss(w, points, teacher, o)->loss;
      param->mutable_data()[i] = keep - eps;
      const double down = MaskGeneratorLoss(w, points, teacher, o)->loss;
      param->mutable_data()[i] = keep;
      const double fd = (up - down) / (2 * eps);
      EXPECT_NEAR(grad->data()[i], fd, 1e-4 + 1e-2 * std::fabs(fd)) << i;
    }
  }
}

TEST(TrajMask, SgdLowersTheLossAndMeetsTheKeepRatio) {
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajMambaWeights w, TrajMambaWeights::Random(SmallConfig(), 7));
  const TrajBatch batch = RandomBatch({40}, 40, 50, 11);
  TANDEM_ASSERT_OK_AND_ASSIGN(TrajEncoding enc, TrajMambaEncode(w, batch));
  const Tensor points = *Tensor::FromData({40, 16}, std::vector<float>(enc.points.data().begin(),
                                                                       enc.points.data().end()));
  const Tensor teacher = *Tensor::FromData({16}, std::vector<float>(enc.embeddings.data().begin(),
                                                                    enc.embeddings.data().end()));
  TANDEM_ASSERT_OK_AND_ASSIGN(MaskGeneratorWeights g, MaskGeneratorWeights::Random(16, 8, 1));
  const MaskLossOptions o{.keep_ratio = 0.25, .lambda = 1.0};
  TANDEM_ASSERT_OK_AND_ASSIGN(double first, MaskSgdStep(&g, points, teacher, o, 0.5));
  double last = first;
  for (int i = 0; i < 300; ++i) last = *MaskSgdStep(&g, points, teacher, o, 0.5);
  EXPECT_LT(last, 0.5 * first);
  TANDEM_ASSERT_OK_AND_ASSIGN(MaskLoss l, MaskGeneratorLoss(g, points, teacher, o));
  EXPECT_NEAR(l.mean_keep, 0.25, 0.1);
}

TEST(TrajMask, SelectKeyPointsKeepsEndpointsAndTopScores) {
  const Tensor s = *Tensor::FromData({8}, {0.1f, 0.9f, 0.2f, 0.8f, 0.3f, 0.05f, 0.7f, 0.0f});
  EXPECT_THAT(SelectKeyPoints(s, 0.5),
              ::tandem::testing::IsOkAndHolds(std::vector<int64_t>{0, 1, 3, 7}));
  EXPECT_THAT(SelectKeyPoints(s, 0.01),
              ::tandem::testing::IsOkAndHolds(std::vector<int64_t>{0, 7}));
  EXPECT_THAT(SelectKeyPoints(s, 1.5), StatusIs(absl::StatusCode::kInvalidArgument));
  const TrajBatch b = RandomBatch({4}, 4, 50, 1);
  EXPECT_THAT(CompressBatch(b, {{0, 0}}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CompressBatch(b, {{0, 4}}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::search
