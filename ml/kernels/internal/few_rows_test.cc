#include "ml/kernels/internal/few_rows.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::internal {
namespace {

using ::tandem::ml::kernels::testing::RandomFloats;

// Every row count up to kFewRows (full tiles of 4 and each remainder),
// key counts around the lane widths (full groups, a partial last group,
// fewer keys than one group), head dims on each path (multiples of 8 and
// 16 take the vector path, 1 to 8 chunks; 12 and 4 the plain one), all
// against a double reference.
TEST(FewRows, ScoresAndAccumulationMatchADoubleReference) {
  for (int64_t d : {4, 12, 16, 32, 48, 64, 128}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 16}) {
      for (int64_t n : {1, 7, 8, 15, 16, 17, 100}) {
        SCOPED_TRACE(::testing::Message() << "d=" << d << " rows=" << rows << " n=" << n);
        const uint32_t seed = static_cast<uint32_t>(d * 1000 + rows * 100 + n);
        const std::vector<float> q = RandomFloats(rows * d, seed, 0.5f),
                                 k = RandomFloats(n * d, seed + 1, 0.5f),
                                 v = RandomFloats(n * d, seed + 2, 0.5f),
                                 acc0 = RandomFloats(rows * d, seed + 3, 0.5f);
        const int64_t stride = n + 3;  // s rows padded: the stride is honoured
        std::vector<float> s(rows * stride, 7.0f);
        ScoreFewRows(q.data(), rows, k.data(), n, d, 0.5f, s.data(), stride);
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double dot = 0;
            for (int64_t t = 0; t < d; ++t) dot += double{q[i * d + t]} * k[j * d + t];
            ASSERT_NEAR(s[i * stride + j], 0.5 * dot, 1e-5) << i << "," << j;
          }
          for (int64_t j = n; j < stride; ++j) ASSERT_EQ(s[i * stride + j], 7.0f);  // untouched
        }
        std::vector<float> acc = acc0;
        AccumulateFewRows(s.data(), stride, rows, v.data(), n, d, acc.data());
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t t = 0; t < d; ++t) {
            double want = acc0[i * d + t];
            for (int64_t j = 0; j < n; ++j) want += double{s[i * stride + j]} * v[j * d + t];
            ASSERT_NEAR(acc[i * d + t], want, 1e-4) << i << "," << t;
          }
        }
      }
    }
  }
}

// The result of a row does not depend on the other rows or on where the
// keys sit in memory: callers rely on it for bit-exact outputs over any
// page layout (kv_runs.h).
TEST(FewRows, ARowsScoresDoNotDependOnTheOtherRowsOrTheKeysAddress) {
  const int64_t d = 32, n = 40;
  const std::vector<float> q = RandomFloats(5 * d, 1, 0.5f), k = RandomFloats(n * d, 2, 0.5f);
  std::vector<float> all(5 * n), one(n);
  ScoreFewRows(q.data(), 5, k.data(), n, d, 1.0f, all.data(), n);
  std::vector<float> moved(n * d + 3);
  std::copy(k.begin(), k.end(), moved.begin() + 3);  // misaligned copy
  ScoreFewRows(q.data() + 3 * d, 1, moved.data() + 3, n, d, 1.0f, one.data(), n);
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(one[j], all[3 * n + j]) << j;
}

}  // namespace
}  // namespace tandem::ml::kernels::internal
