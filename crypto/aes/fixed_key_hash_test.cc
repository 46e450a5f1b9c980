// Fixed-key AES: FIPS-197 known answer, agreement with OpenSSL AES-128-ECB on
// every supported path, the MMO/PRG/half-tree definitions, and bit-identical
// output across paths.
#include "crypto/aes/fixed_key_hash.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using internal::Sigma;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

std::vector<Block> RandomBlocks(size_t n, uint64_t seed) {
  auto rng = DeterministicRandom::FromSeed(seed);
  std::vector<Block> out(n);
  EXPECT_THAT(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), 16 * n)), IsOk());
  return out;
}

std::vector<Block> OpenSslEcb(const uint8_t key[16], const std::vector<Block>& in) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                       &EVP_CIPHER_CTX_free);
  EXPECT_EQ(EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr, key, nullptr), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_set_padding(ctx.get(), 0), 1);
  std::vector<Block> out(in.size());
  int len = 0;
  EXPECT_EQ(EVP_EncryptUpdate(ctx.get(), reinterpret_cast<uint8_t*>(out.data()), &len,
                              reinterpret_cast<const uint8_t*>(in.data()),
                              static_cast<int>(16 * in.size())),
            1);
  EXPECT_EQ(len, static_cast<int>(16 * in.size()));
  return out;
}

class FixedKeyHashPathTest : public ::testing::TestWithParam<AesPath> {};

TEST_P(FixedKeyHashPathTest, MatchesFips197AppendixC1) {
  uint8_t key[16];
  uint8_t pt[16];
  for (int i = 0; i < 16; ++i) {
    key[i] = static_cast<uint8_t>(i);
    pt[i] = static_cast<uint8_t>(0x11 * i);
  }
  const uint8_t expected[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::Create(key, GetParam()));
  Block in = BlockFromBytes(pt);
  Block out;
  h.Encrypt(absl::MakeConstSpan(&in, 1), absl::MakeSpan(&out, 1));
  EXPECT_EQ(out, BlockFromBytes(expected));
}

TEST_P(FixedKeyHashPathTest, EncryptMatchesOpenSslEcbForAllBatchSizes) {
  for (size_t n : {1u, 3u, 8u, 15u, 16u, 17u, 31u, 64u, 100u}) {
    SCOPED_TRACE(n);
    const std::vector<Block> in = RandomBlocks(n, 1000 + n);
    const std::vector<Block> key_block = RandomBlocks(1, 7 * n);
    uint8_t key[16];
    BlockToBytes(key_block[0], key);
    TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::Create(key, GetParam()));
    std::vector<Block> out(n);
    h.Encrypt(in, absl::MakeSpan(out));
    EXPECT_EQ(out, OpenSslEcb(key, in));
  }
}

TEST_P(FixedKeyHashPathTest, HashIsMmoOfSigmaOverOpenSsl) {
  const size_t n = 77;
  const std::vector<Block> in = RandomBlocks(n, 42);
  const uint8_t key[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::Create(key, GetParam()));
  std::vector<Block> sig(n);
  for (size_t i = 0; i < n; ++i) sig[i] = Sigma(in[i]);
  const std::vector<Block> enc = OpenSslEcb(key, sig);
  std::vector<Block> out(n);
  h.Hash(in, absl::MakeSpan(out));
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], enc[i] ^ sig[i]) << i;
  // In place gives the same.
  std::vector<Block> inplace = in;
  h.Hash(inplace, absl::MakeSpan(inplace));
  EXPECT_EQ(inplace, out);
}

TEST_P(FixedKeyHashPathTest, CounterAndLevelFollowTheirDefinitions) {
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::FromName("test", GetParam()));
  const Block seed = RandomBlocks(1, 5)[0];
  for (size_t n : {1u, 5u, 16u, 37u}) {
    std::vector<Block> out(n);
    h.HashCounter(seed, 1000, absl::MakeSpan(out));
    for (size_t i = 0; i < n; ++i) {
      Block x = seed ^ Block{1000 + i, 0};
      Block y;
      h.Hash(absl::MakeConstSpan(&x, 1), absl::MakeSpan(&y, 1));
      EXPECT_EQ(out[i], y);
    }
    const std::vector<Block> parents = RandomBlocks(n, 9 + n);
    const Block cw = RandomBlocks(1, 99)[0];
    std::vector<Block> children(2 * n);
    h.ExpandLevel(parents, cw, absl::MakeSpan(children));
    for (size_t i = 0; i < n; ++i) {
      Block y;
      h.Hash(absl::MakeConstSpan(&parents[i], 1), absl::MakeSpan(&y, 1));
      if (Lsb(parents[i])) y ^= cw;
      EXPECT_EQ(children[2 * i], y);
      EXPECT_EQ(children[2 * i + 1], y ^ parents[i]);
    }
  }
}

TEST_P(FixedKeyHashPathTest, LeafConvertFollowsItsDefinition) {
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::FromName("leaf", GetParam()));
  const size_t n = 37;
  const std::vector<Block> seeds = RandomBlocks(n, 123);
  const std::vector<Block> prev = RandomBlocks(n, 321);
  const Block vc = RandomBlocks(1, 77)[0];
  std::vector<Block> hashed(n);
  h.Hash(seeds, absl::MakeSpan(hashed));
  for (int lane_bits : {32, 64}) {
    for (bool negate : {false, true}) {
      for (bool add : {false, true}) {
        std::vector<Block> out = prev;
        h.LeafConvert(seeds, vc, negate, lane_bits, add, absl::MakeSpan(out));
        for (size_t i = 0; i < n; ++i) {
          const Block expected = internal::LeafLanes(
              hashed[i], Lsb(seeds[i]) ? vc : Block{}, negate, lane_bits, add, prev[i]);
          ASSERT_EQ(out[i], expected) << lane_bits << negate << add << " " << i;
        }
      }
    }
  }
  // Counter form: one seed per lsb value, odd lengths exercise the tails.
  for (const Block seed : {Block{0x1234, 7}, Block{0x1235, 7}}) {
    for (size_t m : {1u, 17u, 40u}) {
      const std::vector<Block> vcs = RandomBlocks(m, 900 + m);
      const std::vector<Block> before = RandomBlocks(m, 901 + m);
      std::vector<Block> ctr(m);
      h.HashCounter(seed, 5, absl::MakeSpan(ctr));
      for (int lane_bits : {32, 64}) {
        for (bool negate : {false, true}) {
          for (bool add : {false, true}) {
            std::vector<Block> out = before;
            h.LeafConvertCounter(seed, 5, vcs, negate, lane_bits, add, absl::MakeSpan(out));
            for (size_t i = 0; i < m; ++i) {
              const Block expected = internal::LeafLanes(
                  ctr[i], Lsb(seed) ? vcs[i] : Block{}, negate, lane_bits, add, before[i]);
              ASSERT_EQ(out[i], expected) << m << lane_bits << negate << add << " " << i;
            }
          }
        }
      }
    }
  }
  // Spot-check LeafLanes itself on one lane: (h + vc) negated, plus prev.
  const Block r = internal::LeafLanes({5, 0}, {7, 0}, true, 64, true, {100, 0});
  EXPECT_EQ(r.lo, 88u);
  const Block r32 = internal::LeafLanes({0xffffffffULL, 0}, {2, 0}, false, 32, false, {});
  EXPECT_EQ(r32.lo, 1u);  // 32-bit lanes wrap without carrying into the next lane
}

// Unaligned views for the kernels that accept unaligned memory (leaf outputs
// and value corrections): 8 bytes past a 16-byte boundary, as the DPF does
// when it converts into uint64_t outputs.
struct UnalignedBlocks {
  explicit UnalignedBlocks(const std::vector<Block>& init) : words(2 * init.size() + 2) {
    if (!init.empty()) std::memcpy(words.data() + 1, init.data(), 16 * init.size());
    n = init.size();
  }
  absl::Span<Block> span() { return absl::MakeSpan(reinterpret_cast<Block*>(words.data() + 1), n); }
  std::vector<Block> ToVector() const {
    std::vector<Block> out(n);
    if (n > 0) std::memcpy(static_cast<void*>(out.data()), words.data() + 1, 16 * n);
    return out;
  }
  std::vector<uint64_t> words;
  size_t n = 0;
};

// Every kernel of GetParam() against the portable one: lengths 0..40 (all
// tails of the 8- and 16-block loops) and a few large ones, buffers that start
// one block past a 32-byte boundary, in place, counters that wrap, both
// control bits, all lane widths and negate/add combinations.
TEST_P(FixedKeyHashPathTest, EveryKernelMatchesPortableForAllLengths) {
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::FromName("paths", GetParam()));
  TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash ref,
                              FixedKeyHash::FromName("paths", AesPath::kPortable));
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 40; ++n) lengths.push_back(n);
  for (size_t n : {63u, 64u, 65u, 100u, 257u, 1029u}) lengths.push_back(n);
  for (size_t n : lengths) {
    SCOPED_TRACE(n);
    // Element 0 is padding so that the spans start at an odd block.
    const std::vector<Block> buf = RandomBlocks(n + 1, 5000 + n);
    const absl::Span<const Block> in = absl::MakeConstSpan(buf).subspan(1);
    std::vector<Block> got(2 * n + 1), want(2 * n);
    const absl::Span<Block> got_n = absl::MakeSpan(got).subspan(1, n);
    const absl::Span<Block> want_n = absl::MakeSpan(want).subspan(0, n);

    h.Encrypt(in, got_n);
    ref.Encrypt(in, want_n);
    ASSERT_TRUE(std::equal(got_n.begin(), got_n.end(), want_n.begin())) << "encrypt";
    std::vector<Block> inplace(in.begin(), in.end());
    h.Encrypt(inplace, absl::MakeSpan(inplace));
    ASSERT_TRUE(std::equal(inplace.begin(), inplace.end(), want_n.begin())) << "encrypt in place";

    h.Hash(in, got_n);
    ref.Hash(in, want_n);
    ASSERT_TRUE(std::equal(got_n.begin(), got_n.end(), want_n.begin())) << "mmo";
    inplace.assign(in.begin(), in.end());
    h.Hash(inplace, absl::MakeSpan(inplace));
    ASSERT_TRUE(std::equal(inplace.begin(), inplace.end(), want_n.begin())) << "mmo in place";

    for (uint64_t first : {uint64_t{7}, ~uint64_t{0} - 20}) {  // the second wraps
      h.HashCounter(in.empty() ? Block{} : in[0], first, got_n);
      ref.HashCounter(in.empty() ? Block{} : in[0], first, want_n);
      ASSERT_TRUE(std::equal(got_n.begin(), got_n.end(), want_n.begin())) << "ctr " << first;
    }

    const Block cw = RandomBlocks(1, 6000 + n)[0];
    const absl::Span<Block> got_2n = absl::MakeSpan(got).subspan(1, 2 * n);
    h.ExpandLevel(in, cw, got_2n);
    ref.ExpandLevel(in, cw, absl::MakeSpan(want));
    ASSERT_TRUE(std::equal(got_2n.begin(), got_2n.end(), want.begin())) << "expand";

    const std::vector<Block> prev = RandomBlocks(n, 7000 + n);
    const std::vector<Block> vcs = RandomBlocks(n, 8000 + n);
    UnalignedBlocks vc_unaligned(vcs);
    for (int lane_bits : {32, 64}) {
      for (bool negate : {false, true}) {
        for (bool add : {false, true}) {
          SCOPED_TRACE(::testing::Message() << lane_bits << " neg " << negate << " add " << add);
          UnalignedBlocks out(prev);
          std::vector<Block> expected = prev;
          h.LeafConvert(in, cw, negate, lane_bits, add, out.span());
          ref.LeafConvert(in, cw, negate, lane_bits, add, absl::MakeSpan(expected));
          ASSERT_EQ(out.ToVector(), expected) << "leaf_convert";
          for (const Block seed : {Block{0x1234, 7}, Block{0x1235, 7}}) {
            UnalignedBlocks out_ctr(prev);
            expected = prev;
            h.LeafConvertCounter(seed, 3, vc_unaligned.span(), negate, lane_bits, add,
                                 out_ctr.span());
            ref.LeafConvertCounter(seed, 3, vcs, negate, lane_bits, add, absl::MakeSpan(expected));
            ASSERT_EQ(out_ctr.ToVector(), expected) << "leaf_convert_counter " << seed.lo;
          }
        }
      }
    }
  }
}

std::string PathName(const ::testing::TestParamInfo<AesPath>& info) {
  return std::string(AesPathName(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllSupportedPaths, FixedKeyHashPathTest,
                         ::testing::ValuesIn(SupportedAesPaths()), PathName);

TEST(FixedKeyHash, AllPathsGiveIdenticalOutput) {
  const std::vector<AesPath> paths = SupportedAesPaths();
  const std::vector<Block> in = RandomBlocks(203, 17);
  std::vector<std::vector<Block>> hashes, counters, levels;
  for (AesPath p : paths) {
    TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::FromName("same", p));
    std::vector<Block> a(in.size()), b(in.size()), c(2 * in.size());
    h.Hash(in, absl::MakeSpan(a));
    h.HashCounter(in[0], 3, absl::MakeSpan(b));
    h.ExpandLevel(in, in[1], absl::MakeSpan(c));
    hashes.push_back(a);
    counters.push_back(b);
    levels.push_back(c);
  }
  for (size_t i = 1; i < paths.size(); ++i) {
    EXPECT_EQ(hashes[i], hashes[0]) << AesPathName(paths[i]);
    EXPECT_EQ(counters[i], counters[0]) << AesPathName(paths[i]);
    EXPECT_EQ(levels[i], levels[0]) << AesPathName(paths[i]);
  }
}

TEST(FixedKeyHash, RejectsBadKeyLength) {
  const uint8_t key[15] = {};
  EXPECT_THAT(FixedKeyHash::Create(key, AesPath::kPortable),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FixedKeyHash, BestPathIsSupportedAndPortableAlwaysIs) {
  EXPECT_TRUE(AesPathSupported(AesPath::kPortable));
  EXPECT_TRUE(AesPathSupported(BestAesPath()));
  // Supported paths are listed slowest first; the best is the fastest of them
  // (vaes, then vaes256, then aesni, then portable).
  const std::vector<AesPath> supported = SupportedAesPaths();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), AesPath::kPortable);
  if (std::getenv("TANDEM_AES_PATH") != nullptr) return;  // forced by the environment
  EXPECT_EQ(BestAesPath(), supported.back());
  if (AesPathSupported(AesPath::kVaes)) {
    EXPECT_EQ(BestAesPath(), AesPath::kVaes);
  } else if (AesPathSupported(AesPath::kVaes256)) {
    EXPECT_EQ(BestAesPath(), AesPath::kVaes256);
  }
}

TEST(FixedKeyHash, PathNamesRoundTrip) {
  for (AesPath p : {AesPath::kPortable, AesPath::kAesNi, AesPath::kVaes, AesPath::kVaes256}) {
    absl::StatusOr<AesPath> back = AesPathFromName(AesPathName(p));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(AesPathFromName("avx9").status().code(), absl::StatusCode::kInvalidArgument);
}

// TANDEM_AES_PATH picks a supported path for the process; an unknown name is
// ignored. Each case runs in a fresh process (the choice is made once).
TEST(FixedKeyHash, EnvironmentForcesTheDefaultPath) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!AesPathSupported(AesPath::kAesNi)) GTEST_SKIP() << "no AES-NI on this CPU";
  EXPECT_EXIT(
      {
        setenv("TANDEM_AES_PATH", "aesni", 1);
        _exit(BestAesPath() == AesPath::kAesNi ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("TANDEM_AES_PATH", "portable", 1);
        _exit(BestAesPath() == AesPath::kPortable ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  const AesPath fastest = SupportedAesPaths().back();
  EXPECT_EXIT(
      {
        setenv("TANDEM_AES_PATH", "avx9", 1);
        _exit(BestAesPath() == fastest ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(FixedKeyHash, CreateSucceedsExactlyOnSupportedPaths) {
  const uint8_t key[16] = {};
  for (AesPath p : {AesPath::kPortable, AesPath::kAesNi, AesPath::kVaes256, AesPath::kVaes}) {
    SCOPED_TRACE(AesPathName(p));
    EXPECT_NE(AesPathName(p), "unknown");
    if (AesPathSupported(p)) {
      TANDEM_ASSERT_OK_AND_ASSIGN(FixedKeyHash h, FixedKeyHash::Create(key, p));
      EXPECT_EQ(h.path(), p);
    } else {
      EXPECT_THAT(FixedKeyHash::Create(key, p), StatusIs(absl::StatusCode::kFailedPrecondition));
    }
  }
  EXPECT_EQ(AesPathName(AesPath::kVaes256), "vaes256");
}

}  // namespace
}  // namespace tandem::crypto
