#include "base/random.h"

#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "base/seed_mix.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

std::array<uint8_t, 16> FromHex(absl::string_view hex) {
  const std::string bytes = absl::HexStringToBytes(hex);
  std::array<uint8_t, 16> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

// NIST SP 800-38A, F.5.1 CTR-AES128.Encrypt: keystream = ciphertext ^ plaintext.
// SplitMix64 from state 0 gives its published first output; StreamSeed is
// the documented composition and tells its three inputs apart.
TEST(SplitMix64, KnownAnswerAndStreamSeeds) {
  static_assert(SplitMix64(0) == 0xe220a8397b1dcdafULL);
  EXPECT_EQ(StreamSeed(5, 7, 9), SplitMix64(SplitMix64(5) ^ 7) ^ SplitMix64(9));
  EXPECT_NE(StreamSeed(5, 7, 9), StreamSeed(5, 9, 7));
  EXPECT_NE(StreamSeed(5, 7, 9), StreamSeed(6, 7, 9));
  EXPECT_NE(StreamSeed(5, 7, 9), StreamSeed(5, 7, 10));
}

// The same NIST vector from 32 bytes of key material: key, then counter.
TEST(DeterministicRandom, KeyMaterialIsKeyThenCounter) {
  const std::array<uint8_t, 16> key = FromHex("2b7e151628aed2a6abf7158809cf4f3c");
  const std::array<uint8_t, 16> counter = FromHex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  std::array<uint8_t, 32> material;
  std::copy(key.begin(), key.end(), material.begin());
  std::copy(counter.begin(), counter.end(), material.begin() + 16);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto rng, DeterministicRandom::FromKeyMaterial(material));
  std::vector<uint8_t> keystream(16);
  TANDEM_ASSERT_OK(rng->Fill(absl::MakeSpan(keystream)));
  const std::string plain = absl::HexStringToBytes("6bc1bee22e409f96e93d7e117393172a");
  const std::string cipher = absl::HexStringToBytes("874d6191b620e3261bef6864990db6ce");
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(keystream[i] ^ static_cast<uint8_t>(plain[i]), static_cast<uint8_t>(cipher[i]))
        << "byte " << i;
  }
}

TEST(DeterministicRandom, MatchesNistCtrKnownAnswer) {
  TANDEM_ASSERT_OK_AND_ASSIGN(
      auto rng, DeterministicRandom::FromKeyAndCounter(
                    FromHex("2b7e151628aed2a6abf7158809cf4f3c"),
                    FromHex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")));
  std::vector<uint8_t> keystream(32);
  TANDEM_ASSERT_OK(rng->Fill(absl::MakeSpan(keystream)));
  const std::string plain = absl::HexStringToBytes(
      "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
  const std::string cipher = absl::HexStringToBytes(
      "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff");
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(keystream[i] ^ static_cast<uint8_t>(plain[i]),
              static_cast<uint8_t>(cipher[i]))
        << "byte " << i;
  }
}

TEST(DeterministicRandom, SameSeedSameStreamAcrossChunking) {
  auto a = DeterministicRandom::FromSeed(42);
  auto b = DeterministicRandom::FromSeed(42);
  std::vector<uint8_t> whole(100), parts(100);
  TANDEM_ASSERT_OK(a->Fill(absl::MakeSpan(whole)));
  TANDEM_ASSERT_OK(b->Fill(absl::MakeSpan(parts).subspan(0, 7)));
  TANDEM_ASSERT_OK(b->Fill(absl::MakeSpan(parts).subspan(7)));
  EXPECT_EQ(whole, parts);
}

TEST(DeterministicRandom, DifferentSeedsDiffer) {
  auto a = DeterministicRandom::FromSeed(1);
  auto b = DeterministicRandom::FromSeed(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t x, a->NextUint64());
  TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t y, b->NextUint64());
  EXPECT_NE(x, y);
}

TEST(OpenSslRandom, ProducesDistinctWords) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t v, OpenSslRandom::Default()->NextUint64());
    seen.insert(v);
  }
  // 64 draws from 2^64 collide with probability ~2^-53.
  EXPECT_EQ(seen.size(), 64u);
}

TEST(OpenSslRandom, FillsEmptySpan) {
  TANDEM_EXPECT_OK(OpenSslRandom::Default()->Fill(absl::Span<uint8_t>()));
}

}  // namespace
}  // namespace tandem
