#include "crypto/dense/dense_sharing.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::testing::HasSubstr;

uint64_t Mask(int w) { return w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1; }

std::vector<uint64_t> RandomValues(uint64_t d, int w, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint64_t> v(d);
  for (uint64_t& x : v) x = gen() & Mask(w);
  return v;
}

std::string Seed(uint8_t first) {
  std::string s(16, '\0');
  for (int i = 0; i < 16; ++i) s[i] = static_cast<char>(first + i);
  return s;
}

// Property: for any D and both widths, the two shares add up to the vector
// mod 2^w, and Expand, Accumulate and AccumulateAndExpand agree.
TEST(DenseSharingTest, SharesAddUpToTheVector) {
  for (int w : {32, 64}) {
    for (uint64_t d : {1u, 2u, 3u, 5u, 1023u, 4097u}) {
      SCOPED_TRACE(testing::Message() << "w=" << w << " D=" << d);
      auto sharing = DenseSharing::Create(d, w);
      ASSERT_TRUE(sharing.ok()) << sharing.status();
      const std::vector<uint64_t> x = RandomValues(d, w, static_cast<uint32_t>(d * w));
      auto shares = sharing->Share(x, OpenSslRandom::Default());
      ASSERT_TRUE(shares.ok()) << shares.status();
      EXPECT_EQ(shares->first.values().size(), d * (w / 8));
      EXPECT_EQ(shares->second.seed().size(), 16u);
      std::vector<uint64_t> y0(d), y1(d), acc(d, 0), acc2(d, 0), y1b(d);
      ASSERT_TRUE(sharing->Expand(shares->first, absl::MakeSpan(y0)).ok());
      ASSERT_TRUE(sharing->Expand(shares->second, absl::MakeSpan(y1)).ok());
      ASSERT_TRUE(sharing->Accumulate(shares->first, absl::MakeSpan(acc)).ok());
      ASSERT_TRUE(sharing->Accumulate(shares->second, absl::MakeSpan(acc)).ok());
      ASSERT_TRUE(
          sharing->AccumulateAndExpand(shares->second, absl::MakeSpan(acc2), absl::MakeSpan(y1b))
              .ok());
      EXPECT_EQ(y1, y1b);
      EXPECT_EQ(acc2, y1);
      for (uint64_t j = 0; j < d; ++j) {
        ASSERT_EQ((y0[j] + y1[j]) & Mask(w), x[j]) << j;
        ASSERT_EQ(acc[j], x[j]) << j;
        ASSERT_EQ(y0[j] & ~Mask(w), 0u);
        ASSERT_EQ(y1[j] & ~Mask(w), 0u);
      }
      // Subtracting undoes adding.
      ASSERT_TRUE(sharing->Accumulate(shares->second, absl::MakeSpan(acc), true).ok());
      EXPECT_EQ(acc, y0);
    }
  }
}

// Known answers under a fixed seed (regenerate only with a new PRG name):
// the leader's packed bytes for x = 0, 1, 2, 3, 4 (so they are x - G(s)).
TEST(DenseSharingTest, KnownAnswerVectors) {
  const std::vector<uint64_t> x = {0, 1, 2, 3, 4};
  auto s64 = DenseSharing::Create(5, 64);
  auto s32 = DenseSharing::Create(5, 32);
  ASSERT_TRUE(s64.ok() && s32.ok());
  auto a = s64->ShareWithSeed(x, Seed(0));
  auto b = s32->ShareWithSeed(x, Seed(0));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(absl::BytesToHexString(a->first.values()),
            "dfb514542c5367865b19a2027a38ed5f0610471058301e49e23937311e20e4d0564338d073434c8f");
  EXPECT_EQ(absl::BytesToHexString(b->first.values()), "dfb514542e5367865c19a2027e38ed5f08104710");
  // The 32-bit lanes are the same PRG bytes: the first four 32-bit pad
  // values are the low and high halves of the first two 64-bit ones.
  std::vector<uint64_t> p64(5), p32(5);
  ASSERT_TRUE(s64->Expand(a->second, absl::MakeSpan(p64)).ok());
  ASSERT_TRUE(s32->Expand(b->second, absl::MakeSpan(p32)).ok());
  EXPECT_EQ(p32[0], p64[0] & 0xffffffffu);
  EXPECT_EQ(p32[1], p64[0] >> 32);
  EXPECT_EQ(p32[2], p64[1] & 0xffffffffu);
  EXPECT_EQ(p32[3], p64[1] >> 32);
}

// The pad is the fixed-key hash in counter mode on every AES path.
TEST(DenseSharingTest, PadIsTheFixedKeyHashInCounterModeOnEveryPath) {
  auto sharing = DenseSharing::Create(6, 64);
  ASSERT_TRUE(sharing.ok());
  proto::DenseShare helper;
  helper.set_party(1);
  helper.set_seed(Seed(7));
  std::vector<uint64_t> pad(6);
  ASSERT_TRUE(sharing->Expand(helper, absl::MakeSpan(pad)).ok());
  for (AesPath path : SupportedAesPaths()) {
    auto h = FixedKeyHash::FromName("tandem.dense.prg.v1", path);
    ASSERT_TRUE(h.ok());
    Block blocks[3];
    h->HashCounter(BlockFromBytes(helper.seed().data()), 0, absl::MakeSpan(blocks));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(pad[2 * i], blocks[i].lo) << AesPathName(path);
      EXPECT_EQ(pad[2 * i + 1], blocks[i].hi) << AesPathName(path);
    }
  }
}

TEST(DenseSharingTest, DifferentSeedsGiveDifferentPads) {
  auto sharing = DenseSharing::Create(64, 64);
  ASSERT_TRUE(sharing.ok());
  const std::vector<uint64_t> x(64, 5);
  auto a = sharing->ShareWithSeed(x, Seed(0));
  auto b = sharing->ShareWithSeed(x, Seed(1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->first.values(), b->first.values());
}

TEST(DenseSharingTest, MalformedSharesAreRefusedWithTheFieldNamed) {
  auto sharing = DenseSharing::Create(10, 64);
  ASSERT_TRUE(sharing.ok());
  auto shares = sharing->Share(std::vector<uint64_t>(10, 1), OpenSslRandom::Default());
  ASSERT_TRUE(shares.ok());
  const proto::DenseShare& leader = shares->first;
  const proto::DenseShare& helper = shares->second;
  EXPECT_TRUE(sharing->Validate(leader, 0).ok());
  EXPECT_TRUE(sharing->Validate(helper, 1).ok());
  // Each share at the other server: refused.
  EXPECT_THAT(sharing->Validate(leader, 1).message(), HasSubstr("party 0"));
  EXPECT_THAT(sharing->Validate(helper, 0).message(), HasSubstr("party 1"));
  proto::DenseShare bad = leader;
  bad.mutable_values()->pop_back();
  EXPECT_THAT(sharing->Validate(bad, 0).message(), HasSubstr("80 bytes"));
  bad = leader;
  bad.set_seed(Seed(0));
  EXPECT_FALSE(sharing->Validate(bad, 0).ok());
  bad = helper;
  bad.set_seed("short");
  EXPECT_THAT(sharing->Validate(bad, 1).message(), HasSubstr("16-byte seed"));
  bad = helper;
  bad.set_values("x");
  EXPECT_FALSE(sharing->Validate(bad, 1).ok());
  bad = helper;
  bad.set_party(2);
  EXPECT_FALSE(sharing->Validate(bad, 1).ok());
  bad = helper;
  bad.GetReflection()->MutableUnknownFields(&bad)->AddVarint(99, 1);
  EXPECT_THAT(sharing->Validate(bad, 1).message(), HasSubstr("unknown fields"));
  // Nothing is added for a malformed share.
  std::vector<uint64_t> acc(10, 3);
  bad = leader;
  bad.mutable_values()->append("xx");
  EXPECT_FALSE(sharing->Accumulate(bad, absl::MakeSpan(acc)).ok());
  EXPECT_EQ(acc, std::vector<uint64_t>(10, 3));
  std::vector<uint64_t> wrong(9);
  EXPECT_FALSE(sharing->Expand(leader, absl::MakeSpan(wrong)).ok());
}

TEST(DenseSharingTest, CreateAndShareCheckTheirArguments) {
  EXPECT_FALSE(DenseSharing::Create(0, 64).ok());
  EXPECT_FALSE(DenseSharing::Create(kMaxDenseDimension + 1, 64).ok());
  EXPECT_FALSE(DenseSharing::Create(8, 16).ok());
  auto sharing = DenseSharing::Create(4, 32);
  ASSERT_TRUE(sharing.ok());
  EXPECT_FALSE(sharing->Share(std::vector<uint64_t>(3, 0), OpenSslRandom::Default()).ok());
  EXPECT_FALSE(
      sharing->Share(std::vector<uint64_t>{0, 0, 0, uint64_t{1} << 32}, OpenSslRandom::Default())
          .ok());
  EXPECT_FALSE(sharing->ShareWithSeed(std::vector<uint64_t>(4, 0), "short").ok());
  EXPECT_FALSE(sharing->Share(std::vector<uint64_t>(4, 0), nullptr).ok());
}

TEST(DenseSharingTest, RoundDigestDependsOnTheShapeOnly) {
  auto a = DenseSharing::Create(10, 64);
  auto b = DenseSharing::Create(10, 64);
  auto c = DenseSharing::Create(11, 64);
  auto d = DenseSharing::Create(10, 32);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->round_digest(), b->round_digest());
  EXPECT_NE(a->round_digest(), c->round_digest());
  EXPECT_NE(a->round_digest(), d->round_digest());
}

}  // namespace
}  // namespace tandem::crypto
