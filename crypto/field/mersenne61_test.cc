#include "crypto/field/mersenne61.h"

#include <random>

#include "gtest/gtest.h"

namespace tandem::crypto::field {
namespace {

// Reference arithmetic with 128-bit % (slow, obviously right).
uint64_t RefMul(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % kP61);
}

TEST(Mersenne61, MatchesReferenceArithmetic) {
  std::mt19937_64 gen(61);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t a = gen() % kP61, b = gen() % kP61;
    EXPECT_EQ(Mul(a, b), RefMul(a, b));
    EXPECT_EQ(Add(a, b), (a + b) % kP61);
    EXPECT_EQ(Sub(a, b), (a + kP61 - b) % kP61);
    const uint64_t hi = gen(), lo = gen();
    const unsigned __int128 x = (static_cast<unsigned __int128>(hi) << 64) | lo;
    EXPECT_EQ(Reduce128(hi, lo), static_cast<uint64_t>(x % kP61));
  }
}

TEST(Mersenne61, EdgeCases) {
  EXPECT_EQ(Reduce64(kP61), 0u);
  EXPECT_EQ(Reduce64(kP61 - 1), kP61 - 1);
  EXPECT_EQ(Reduce64(~uint64_t{0}), (~uint64_t{0}) % kP61);
  EXPECT_EQ(Neg(0), 0u);
  EXPECT_EQ(Add(kP61 - 1, 1), 0u);
  EXPECT_EQ(Mul(kP61 - 1, kP61 - 1), 1u);  // (-1)^2
  EXPECT_EQ(Reduce128(~uint64_t{0}, ~uint64_t{0}),
            static_cast<uint64_t>((~static_cast<unsigned __int128>(0)) % kP61));
}

TEST(Mersenne61, InverseIsMultiplicative) {
  std::mt19937_64 gen(7);
  for (int i = 0; i < 200; ++i) {
    const uint64_t a = 1 + gen() % (kP61 - 1);
    EXPECT_EQ(Mul(a, Inverse(a)), 1u) << a;
  }
  EXPECT_EQ(Inverse(0), 0u);
}

}  // namespace
}  // namespace tandem::crypto::field
