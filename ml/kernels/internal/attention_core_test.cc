#include "ml/kernels/internal/attention_core.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::internal {
namespace {

using ::tandem::ml::kernels::testing::RandomFloats;

// The same values at every offset from a 64-byte boundary give the same
// bits: the worker's buffers and a caller's reference sit at different
// addresses, and outputs are compared bit for bit across them.
TEST(AttentionCore, SoftmaxDoesNotDependOnTheAddress) {
  for (int64_t n : {1, 5, 16, 37, 100, 1000}) {
    std::vector<float> x = RandomFloats(n, static_cast<uint64_t>(n), 2.0f);
    x[n / 2] = -std::numeric_limits<float>::infinity();  // a masked entry
    if (n == 1) x[0] = 0.5f;
    std::vector<float> first;
    double sum = 0;
    for (int offset = 0; offset < 16; ++offset) {
      alignas(64) static float buffer[1024 + 16];
      std::memcpy(buffer + offset, x.data(), n * sizeof(float));
      SoftmaxInPlace(buffer + offset, n);
      std::vector<float> got(buffer + offset, buffer + offset + n);
      if (offset == 0) {
        first = got;
        for (float e : got) sum += e;
      } else {
        ASSERT_EQ(std::memcmp(got.data(), first.data(), n * sizeof(float)), 0)
            << "n=" << n << " offset=" << offset;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    if (n > 1) EXPECT_EQ(first[n / 2], 0.0f);
  }
}

TEST(AttentionCore, AttendRowsDoesNotDependOnTheAddress) {
  for (int64_t nq : {4, 40}) {  // the few-rows kernels and the GEMM
    const int64_t nk = 300, d = 32;
    const std::vector<float> q = RandomFloats(nq * d, 1, 2.0f), k = RandomFloats(nk * d, 2, 2.0f),
                             v = RandomFloats(nk * d, 3, 2.0f);
    std::vector<float> first;
    for (int offset : {0, 1, 3, 8}) {
      std::vector<float> qb(q.size() + 16), kb(k.size() + 16), vb(v.size() + 16), out(nq * d + 16);
      std::copy(q.begin(), q.end(), qb.begin() + offset);
      std::copy(k.begin(), k.end(), kb.begin() + offset);
      std::copy(v.begin(), v.end(), vb.begin() + offset);
      AttendRows(qb.data() + offset, d, nq, kb.data() + offset, d, vb.data() + offset, d, nk, d,
                 kNoCausalMask, 0.2f, out.data() + offset, d);
      std::vector<float> got(out.begin() + offset, out.begin() + offset + nq * d);
      if (first.empty()) {
        first = got;
      } else {
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
            << "nq=" << nq << " offset=" << offset;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::ml::kernels::internal
