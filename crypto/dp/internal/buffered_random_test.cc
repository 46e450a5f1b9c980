#include "crypto/dp/internal/buffered_random.h"

#include <cstring>
#include <deque>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::dp::internal {
namespace {

using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;

// Serves a fixed script of 64-bit words (then zeros), in buffer-sized fills.
class ScriptedRandom : public SecureRandom {
 public:
  explicit ScriptedRandom(std::vector<uint64_t> words) : words_(words.begin(), words.end()) {}
  absl::Status Fill(absl::Span<uint8_t> out) override {
    for (size_t off = 0; off + 8 <= out.size(); off += 8) {
      uint64_t w = 0;
      if (!words_.empty()) {
        w = words_.front();
        words_.pop_front();
      }
      std::memcpy(out.data() + off, &w, 8);
    }
    return absl::OkStatus();
  }

 private:
  std::deque<uint64_t> words_;
};

class FailingRandom : public SecureRandom {
 public:
  absl::Status Fill(absl::Span<uint8_t>) override { return absl::InternalError("rng down"); }
};

TEST(BufferedRandom, UniformBelowRejectsInsteadOfReducingModulo) {
  // n = 3: two-bit candidates; 3 is rejected (a modulo reduction would map it to 0).
  ScriptedRandom rng({3, 0x7, 2});
  BufferedRandom r(&rng);
  EXPECT_THAT(r.UniformBelow(3), IsOkAndHolds(2u));
  EXPECT_EQ(r.words_consumed(), 3u);  // 3 and 7&3 = 3 rejected, then 2.
}

TEST(BufferedRandom, UniformBelowMasksToBitLength) {
  ScriptedRandom rng({0xfffffffffffffff5ull});
  BufferedRandom r(&rng);
  EXPECT_THAT(r.UniformBelow(16), IsOkAndHolds(5u));  // low four bits
  EXPECT_THAT(r.UniformBelow(1), IsOkAndHolds(0u));   // needs no randomness
  EXPECT_EQ(r.words_consumed(), 1u);
}

TEST(BufferedRandom, UniformBelowFullRange) {
  ScriptedRandom rng({~uint64_t{0}});
  BufferedRandom r(&rng);
  EXPECT_THAT(r.UniformBelow(~uint64_t{0}), IsOkAndHolds(0u));  // max value rejected, next word is 0
}

TEST(BufferedRandom, BigUniformBelowRejectsAboveBound) {
  // n = 2^64 + 1 (65 bits): candidates are (low, high & 1).
  BigUint n;
  n.set_limb(0, 1);
  n.set_limb(1, 1);
  ScriptedRandom rng({5, 1, 9, 0});  // (5, 1) = 2^64 + 5 >= n: rejected; then 9.
  BufferedRandom r(&rng);
  TANDEM_ASSERT_OK_AND_ASSIGN(const BigUint v, r.UniformBelow(n));
  EXPECT_EQ(v, BigUint(9));
  EXPECT_EQ(r.words_consumed(), 4u);
}

TEST(BufferedRandom, BitsComeFromOneWordLeastSignificantFirst) {
  ScriptedRandom rng({0b1011});
  BufferedRandom r(&rng);
  EXPECT_THAT(r.Bit(), IsOkAndHolds(true));
  EXPECT_THAT(r.Bit(), IsOkAndHolds(true));
  EXPECT_THAT(r.Bit(), IsOkAndHolds(false));
  EXPECT_THAT(r.Bit(), IsOkAndHolds(true));
  EXPECT_EQ(r.words_consumed(), 1u);
}

TEST(BufferedRandom, ErrorsPropagate) {
  FailingRandom rng;
  BufferedRandom r(&rng);
  EXPECT_THAT(r.Word(), StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("rng down")));
  EXPECT_THAT(r.UniformBelow(uint64_t{0}), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(r.UniformBelow(BigUint()), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(BigUint, ArithmeticMatchesInt128) {
  const unsigned __int128 a = (static_cast<unsigned __int128>(0x123456789abcdefull) << 64) | 0xfedcba9876543210ull;
  const unsigned __int128 b = 0xffffffffffffffffull;
  bool overflow = false;
  const BigUint p = BigUint::Mul(BigUint::FromU128(a), BigUint::FromU128(b), &overflow);
  EXPECT_FALSE(overflow);
  // a * b = a * 2^64 - a.
  const BigUint shifted = [&] {
    BigUint s;
    s.set_limb(1, static_cast<uint64_t>(a));
    s.set_limb(2, static_cast<uint64_t>(a >> 64));
    return s;
  }();
  EXPECT_EQ(p, BigUint::Sub(shifted, BigUint::FromU128(a)));
  EXPECT_EQ(p.BitLength(), 121 + 64);
  EXPECT_EQ(BigUint().BitLength(), 0);
  EXPECT_TRUE(BigUint(3) < BigUint(4));
  BigUint big;
  big.set_limb(5, 1);
  BigUint::Mul(big, big, &overflow);
  EXPECT_TRUE(overflow);
}

}  // namespace
}  // namespace tandem::dp::internal
