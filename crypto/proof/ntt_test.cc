// NttDomain against the naive O(n^2) evaluation (Horner at every point,
// the points computed by repeated multiplication, not by the tables under
// test), and its barycentric coefficients against direct evaluation.
#include "crypto/proof/ntt.h"

#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

uint64_t RandomElement(SecureRandom* rng) { return gl::Reduce64(rng->NextUint64().value()); }

uint64_t Horner(const std::vector<uint64_t>& coeffs, uint64_t x) {
  uint64_t acc = 0;
  for (size_t i = coeffs.size(); i-- > 0;) acc = gl::Add(gl::Mul(acc, x), coeffs[i]);
  return acc;
}

size_t Reverse(size_t x, int bits) {
  size_t r = 0;
  for (int b = 0; b < bits; ++b) r = (r << 1) | ((x >> b) & 1);
  return r;
}

class NttSizes : public ::testing::TestWithParam<int> {};

TEST_P(NttSizes, TransformsMatchNaiveEvaluation) {
  const int log_n = GetParam();
  const size_t n = size_t{1} << log_n;
  auto domain = NttDomain::Create(log_n);
  ASSERT_THAT(domain.status(), IsOk());
  auto rng = DeterministicRandom::FromSeed(100 + log_n);
  // omega by its definition: 7^((p-1)/n), generating a group of order n.
  const uint64_t omega = gl::Pow(7, (gl::kP - 1) / n);
  std::vector<uint64_t> coeffs(n);
  for (auto& c : coeffs) c = RandomElement(rng.get());
  for (int s = 0; s < NttDomain::kMaxCosets; ++s) {
    const uint64_t shift = gl::Pow(7, static_cast<uint64_t>(s));
    // Forward: coefficients (bit-reversed, scaled by h^j / n as CosetScale
    // says, here applied to n c_j) -> f(h omega^i).
    std::vector<uint64_t> data(n);
    for (size_t j = 0; j < n; ++j) {
      data[j] = gl::Mul(gl::Mul(coeffs[Reverse(j, log_n)], n), domain->CosetScale(s)[j]);
    }
    domain->CoefficientsToValues(absl::MakeSpan(data));
    uint64_t x = shift;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(gl::Reduce64(data[i]), Horner(coeffs, x)) << "coset " << s << " point " << i;
      x = gl::Mul(x, omega);
    }
  }
  // Inverse: values on H -> n c_j, bit-reversed.
  std::vector<uint64_t> values(n);
  uint64_t x = 1;
  for (size_t i = 0; i < n; ++i) {
    values[i] = Horner(coeffs, x);
    EXPECT_EQ(domain->Point(i), x);
    x = gl::Mul(x, omega);
  }
  domain->ValuesToCoefficients(absl::MakeSpan(values));
  for (size_t j = 0; j < n; ++j) {
    ASSERT_EQ(gl::Reduce64(values[j]), gl::Mul(coeffs[Reverse(j, log_n)], n)) << j;
  }
}

TEST_P(NttSizes, LagrangeCoefficientsInterpolate) {
  const int log_n = GetParam();
  const size_t n = size_t{1} << log_n;
  const NttDomain domain = NttDomain::Create(log_n).value();
  auto rng = DeterministicRandom::FromSeed(200 + log_n);
  for (int cosets : {1, 3}) {
    // A polynomial of the largest degree the union determines.
    std::vector<uint64_t> coeffs(cosets * n);
    for (auto& c : coeffs) c = RandomElement(rng.get());
    std::vector<uint64_t> values(cosets * n), lambda(cosets * n);
    for (int s = 0; s < cosets; ++s) {
      for (size_t i = 0; i < n; ++i) {
        values[s * n + i] = Horner(coeffs, gl::Mul(domain.CosetShift(s), domain.Point(i)));
      }
    }
    for (int trial = 0; trial < 4; ++trial) {
      const uint64_t r = RandomElement(rng.get());
      ASSERT_FALSE(domain.InCosets(r, cosets));
      domain.LagrangeCoefficients(r, cosets, absl::MakeSpan(lambda));
      uint64_t sum = 0;
      for (size_t k = 0; k < values.size(); ++k) sum = gl::Add(sum, gl::Mul(lambda[k], values[k]));
      EXPECT_EQ(sum, Horner(coeffs, r)) << cosets;
    }
    // Every domain point is recognised.
    for (int s = 0; s < cosets; ++s) {
      EXPECT_TRUE(domain.InCosets(gl::Mul(domain.CosetShift(s), domain.Point(n - 1)), cosets));
    }
  }
  EXPECT_FALSE(domain.InCosets(domain.CosetShift(1), 1));
  EXPECT_TRUE(domain.InCosets(domain.CosetShift(1), 3));
}

INSTANTIATE_TEST_SUITE_P(LogSizes, NttSizes, ::testing::Values(0, 1, 2, 3, 5, 8));

TEST(NttDomain, RelaxedInputsGiveTheSameTransform) {
  // x and x + p (when below 2^64) are the same element.
  const NttDomain domain = NttDomain::Create(4).value();
  std::vector<uint64_t> a(16), b(16);
  for (size_t i = 0; i < 16; ++i) {
    a[i] = i * 1000003;
    b[i] = i % 2 == 0 ? a[i] + gl::kP : a[i];  // a[i] < 2^32 - 1 = 2^64 - p
  }
  domain.ValuesToCoefficients(absl::MakeSpan(a));
  domain.ValuesToCoefficients(absl::MakeSpan(b));
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(gl::Reduce64(a[i]), gl::Reduce64(b[i]));
}

// The AVX-512 transforms (used when the build has AVX-512F and n >= 16)
// and the AVX2 ones (AVX2, n >= 8) against the portable ones, bit for bit,
// relaxed outputs included, on relaxed inputs with edge values; without
// either, both sides are the portable code.
TEST(NttDomain, TransformsEqualThePortableOnesBitForBit) {
  auto rng = DeterministicRandom::FromSeed(55);
  const uint64_t edges[] = {0,
                            1,
                            gl::kP - 1,
                            gl::kP,
                            gl::kP + 1,
                            ~uint64_t{0},
                            uint64_t{1} << 32,
                            gl::kEpsilon,
                            0xffffffff00000000ULL};
  for (int log_n : {0, 1, 2, 3, 4, 5, 8, 10}) {
    const NttDomain domain = NttDomain::Create(log_n).value();
    const size_t n = domain.size();
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<uint64_t> x(n);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng->NextUint64().value();
        x[i] = r % 3 == 0 ? edges[(r >> 8) % std::size(edges)] : r;
      }
      std::vector<uint64_t> fast = x, portable = x;
      domain.ValuesToCoefficients(absl::MakeSpan(fast));
      domain.ValuesToCoefficientsPortable(absl::MakeSpan(portable));
      ASSERT_EQ(fast, portable) << "inverse, log n " << log_n;
      fast = x;
      portable = x;
      domain.CoefficientsToValues(absl::MakeSpan(fast));
      domain.CoefficientsToValuesPortable(absl::MakeSpan(portable));
      ASSERT_EQ(fast, portable) << "forward, log n " << log_n;
      for (int s = 0; s < NttDomain::kMaxCosets; ++s) {
        std::vector<uint64_t> coset(n);
        domain.CoefficientsToCosetValues(x, s, absl::MakeSpan(coset));
        for (size_t j = 0; j < n; ++j) portable[j] = gl::Mul(x[j], domain.CosetScale(s)[j]);
        domain.CoefficientsToValuesPortable(absl::MakeSpan(portable));
        ASSERT_EQ(coset, portable) << "coset " << s << ", log n " << log_n;
      }
    }
  }
}

TEST(NttDomain, CreateValidates) {
  EXPECT_THAT(NttDomain::Create(-1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NttDomain::Create(25).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto::proof
