#include "ml/kernels/cat.h"

#include <cmath>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

struct Dims {
  int64_t b, h, n, d;
};

class CatFftVsGather : public ::testing::TestWithParam<Dims> {};

TEST_P(CatFftVsGather, FftEqualsGatherForm) {
  const Dims p = GetParam();
  const Tensor z = RandomTensor({p.b, p.h, p.n}, 100 + p.n);
  const Tensor v = RandomTensor({p.b, p.n, p.d}, 200 + p.n);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor fft, CatMix(z, v, CatMethod::kFft));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gather, CatMix(z, v, CatMethod::kGather));
  EXPECT_LT(MaxAbsDiff(fft, gather), 2e-5 * std::log2(static_cast<double>(p.n) + 1));
}

// Power-of-two and other lengths; odd head sizes exercise the unpaired channel.
INSTANTIATE_TEST_SUITE_P(Shapes, CatFftVsGather,
                         ::testing::Values(Dims{1, 1, 8, 4}, Dims{2, 2, 12, 6}, Dims{1, 3, 17, 9},
                                           Dims{2, 2, 64, 8}, Dims{1, 4, 100, 16},
                                           Dims{1, 1, 1, 2}));

TEST(Cat, GatherMatchesExplicitCirculant) {
  const int64_t n = 6, d = 2;
  const Tensor z = RandomTensor({1, 1, n}, 1);
  const Tensor v = RandomTensor({1, n, d}, 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, CatMix(z, v, CatMethod::kGather));
  std::vector<double> s(n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(double{z.data()[j]}));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < d; ++c) {
      double acc = 0;  // R_ij = z*_{(j - i) mod N}
      for (int64_t j = 0; j < n; ++j) acc += s[(j - i + n) % n] / sum * v.data()[j * d + c];
      EXPECT_NEAR(y.data()[i * d + c], acc, 1e-5);
    }
  }
}

TEST(Cat, OneHotShiftsTheSequence) {
  const int64_t n = 10, d = 4, shift = 3;
  Tensor z = *Tensor::Zeros({1, 1, n});
  for (int64_t j = 0; j < n; ++j) z.mutable_data()[j] = j == shift ? 0.0f : -1e4f;
  const Tensor v = RandomTensor({1, n, d}, 3);
  for (CatMethod m : {CatMethod::kFft, CatMethod::kGather}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, CatMix(z, v, m));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        EXPECT_NEAR(y.data()[i * d + c], v.data()[((i + shift) % n) * d + c], 1e-5);
      }
    }
  }
}

TEST(Cat, RowsSumToOneSoConstantValuesPassThrough) {
  const int64_t n = 13, d = 3;
  const Tensor z = RandomTensor({1, 1, n}, 4, 3.0f);
  Tensor v = *Tensor::Zeros({1, n, d});
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < d; ++c) v.mutable_data()[j * d + c] = static_cast<float>(c + 1);
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, CatMix(z, v, CatMethod::kFft));
  EXPECT_LT(MaxAbsDiff(y, v), 1e-5);
}

TEST(Cat, ForwardComposesProjections) {
  const int64_t b = 1, n = 9, d = 4, h = 2;
  const Tensor x = RandomTensor({b, n, d}, 5);
  const Tensor wa = RandomTensor({d, h}, 6), wv = RandomTensor({d, d}, 7),
               wo = RandomTensor({d, d}, 8);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, CatForward(x, wa, wv, wo, CatMethod::kFft));
  // Reference by explicit loops.
  Tensor z = *Tensor::Zeros({b, h, n});
  Tensor v = *Tensor::Zeros({b, n, d});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t hh = 0; hh < h; ++hh) {
      for (int64_t c = 0; c < d; ++c) z.mutable_data()[hh * n + i] += x.data()[i * d + c] * wa.data()[c * h + hh];
    }
    for (int64_t o = 0; o < d; ++o) {
      for (int64_t c = 0; c < d; ++c) v.mutable_data()[i * d + o] += x.data()[i * d + c] * wv.data()[c * d + o];
    }
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor mixed, CatMix(z, v, CatMethod::kGather));
  Tensor ref = *Tensor::Zeros({b, n, d});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < d; ++o) {
      for (int64_t c = 0; c < d; ++c) ref.mutable_data()[i * d + o] += mixed.data()[i * d + c] * wo.data()[c * d + o];
    }
  }
  EXPECT_LT(MaxAbsDiff(y, ref), 1e-4);
}

TEST(Cat, RejectsBadShapes) {
  const Tensor z = RandomTensor({1, 3, 8}, 1);
  EXPECT_THAT(CatMix(z, RandomTensor({1, 8, 4}, 2), CatMethod::kFft),
              StatusIs(absl::StatusCode::kInvalidArgument));  // 4 % 3 != 0
  EXPECT_THAT(CatMix(z, RandomTensor({1, 7, 6}, 2), CatMethod::kFft),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CatMix(z, RandomTensor({2, 8, 6}, 2), CatMethod::kGather),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const Tensor x = RandomTensor({1, 8, 4}, 3);
  EXPECT_THAT(CatForward(x, RandomTensor({4, 3}, 4), RandomTensor({4, 4}, 5),
                         RandomTensor({4, 4}, 6), CatMethod::kFft),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CatForward(x, RandomTensor({4, 2}, 4), RandomTensor({4, 3}, 5),
                         RandomTensor({4, 4}, 6), CatMethod::kFft),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels
