#include "crypto/proof/field_vector.h"

#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

uint64_t RandomElement(SecureRandom* rng) { return field::Reduce64(rng->NextUint64().value()); }

TEST(FromSigned, MatchesModularReduction) {
  EXPECT_EQ(FromSigned(0), 0u);
  EXPECT_EQ(FromSigned(5), 5u);
  EXPECT_EQ(FromSigned(-1), kP61 - 1);
  EXPECT_EQ(FromSigned(-static_cast<int64_t>(kP61)), 0u);
  EXPECT_EQ(FromSigned(int64_t{1} << 62), 2u);  // 2^62 = 2 * 2^61 = 2 (mod p)
  EXPECT_EQ(field::Add(FromSigned(-123456789), 123456789), 0u);
}

TEST(BatchInverse, ProductsAreOne) {
  auto rng = DeterministicRandom::FromSeed(7);
  std::vector<uint64_t> in(100), out(100);
  for (auto& v : in) v = 1 + RandomElement(rng.get()) % (kP61 - 1);
  BatchInverse(in, absl::MakeSpan(out));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(field::Mul(in[i], out[i]), 1u) << i;
}

TEST(LagrangeDomain, InterpolatesRandomPolynomials) {
  auto rng = DeterministicRandom::FromSeed(11);
  for (size_t n : {1, 2, 3, 17, 64}) {
    SCOPED_TRACE(n);
    std::vector<uint64_t> coeffs(n);
    for (auto& c : coeffs) c = RandomElement(rng.get());
    auto horner = [&](uint64_t x) {
      uint64_t acc = 0;
      for (size_t i = n; i-- > 0;) acc = field::Add(field::Mul(acc, x), coeffs[i]);
      return acc;
    };
    std::vector<uint64_t> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = horner(i);
    auto domain = LagrangeDomain::Create(n);
    ASSERT_THAT(domain.status(), IsOk());
    for (int t = 0; t < 5; ++t) {
      const uint64_t x = RandomElement(rng.get());
      EXPECT_EQ(domain->Evaluate(values, x), horner(x));
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(domain->Evaluate(values, i), values[i]);
  }
}

TEST(LagrangeDomain, RejectsBadSizes) {
  EXPECT_THAT(LagrangeDomain::Create(0).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ExpandField, DeterministicSeparatedAndReduced) {
  const uint8_t seed[16] = {1, 2, 3};
  std::vector<uint64_t> a(300), b(300), c(300);
  ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(a)), IsOk());
  ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(b)), IsOk());
  ASSERT_THAT(ExpandField(seed, "y", absl::MakeSpan(c)), IsOk());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (uint64_t v : a) EXPECT_LT(v, kP61);
  // A prefix of a longer expansion is the shorter expansion.
  std::vector<uint64_t> shorter(10);
  ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(shorter)), IsOk());
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), a.begin()));
}

TEST(HashParts, LengthPrefixIsInjective) {
  auto ab_c = HashParts({"ab", "c"});
  auto a_bc = HashParts({"a", "bc"});
  ASSERT_THAT(ab_c.status(), IsOk());
  ASSERT_THAT(a_bc.status(), IsOk());
  EXPECT_NE(*ab_c, *a_bc);
  EXPECT_EQ(ab_c->size(), 32u);
}

}  // namespace
}  // namespace tandem::crypto::proof
