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

uint64_t RandomElement(SecureRandom* rng) { return gl::Reduce64(rng->NextUint64().value()); }

TEST(FromSigned, MatchesModularReduction) {
  EXPECT_EQ(FromSigned(0), 0u);
  EXPECT_EQ(FromSigned(5), 5u);
  EXPECT_EQ(FromSigned(-1), gl::kP - 1);
  EXPECT_EQ(FromSigned(INT64_MIN), gl::kP - (uint64_t{1} << 63));  // p - 2^63
  EXPECT_EQ(FromSigned(INT64_MAX), uint64_t{INT64_MAX});
  EXPECT_EQ(gl::Add(FromSigned(-123456789), 123456789), 0u);
}

TEST(BatchInverse, ProductsAreOne) {
  auto rng = DeterministicRandom::FromSeed(7);
  std::vector<uint64_t> in(100), out(100);
  for (auto& v : in) v = 1 + RandomElement(rng.get()) % (gl::kP - 1);
  BatchInverse(in, absl::MakeSpan(out));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(gl::Mul(in[i], out[i]), 1u) << i;
}

TEST(DotAccumulator, CountsCarriesOutOf128Bits) {
  // (p-1)^2 > 2^127: two such products already carry out of 128 bits.
  for (int terms : {1, 2, 3, 1000}) {
    DotAccumulator acc;
    for (int i = 0; i < terms; ++i) acc.Add(gl::kP - 1, gl::kP - 1);  // (-1)^2 = 1 each
    EXPECT_EQ(acc.Get(), static_cast<uint64_t>(terms));
  }
  auto rng = DeterministicRandom::FromSeed(8);
  DotAccumulator acc;
  uint64_t want = 0;
  for (int i = 0; i < 500; ++i) {
    const uint64_t a = RandomElement(rng.get()), b = RandomElement(rng.get());
    acc.Add(a, b);
    want = gl::Add(want, gl::Mul(a, b));
  }
  EXPECT_EQ(acc.Get(), want);
}

TEST(TakeFieldWords, RejectsWordsAtOrAboveP) {
  const uint64_t words[] = {gl::kP, 5, ~uint64_t{0}, gl::kP - 1, gl::kP + 1, 0, 7};
  std::vector<uint64_t> out(3, 99);
  EXPECT_EQ(TakeFieldWords(words, absl::MakeSpan(out)), 3u);
  EXPECT_EQ(out, (std::vector<uint64_t>{5, gl::kP - 1, 0}));
  std::vector<uint64_t> more(10, 99);
  EXPECT_EQ(TakeFieldWords(words, absl::MakeSpan(more)), 4u);
  EXPECT_EQ(more[3], 7u);
}

TEST(ExpandField, DeterministicSeparatedAndReduced) {
  const uint8_t seed[16] = {1, 2, 3};
  std::vector<uint64_t> a(300), b(300), c(300);
  ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(a)), IsOk());
  ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(b)), IsOk());
  ASSERT_THAT(ExpandField(seed, "y", absl::MakeSpan(c)), IsOk());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (uint64_t v : a) EXPECT_LT(v, gl::kP);
  // A prefix of a longer expansion is the shorter expansion (odd lengths
  // end inside a block; each shorter request hashes fewer blocks than the
  // 300-element one).
  for (size_t n : {1, 10, 257, 299}) {
    std::vector<uint64_t> shorter(n);
    ASSERT_THAT(ExpandField(seed, "x", absl::MakeSpan(shorter)), IsOk());
    EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), a.begin())) << n;
  }
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
