// BlockDpf: block leaves reconstruct for every leaf-conversion path (fused
// one-block leaves, fused counter-mode leaves with 32/64-bit lanes, and the
// generic path), with both output widths, plus the proof-only pass.
#include "crypto/dpf/block_dpf.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

// (log_num_blocks, block_size, value_bits)
class BlockDpfTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

template <typename T>
void CheckBlocks(const BlockDpf& dpf, uint64_t seed) {
  auto rng = DeterministicRandom::FromSeed(seed);
  const uint64_t mask = dpf.value_mask();
  const size_t b = dpf.block_size();
  const uint64_t index = rng->NextUint64().value() % dpf.num_blocks();
  std::vector<uint64_t> value(b);
  for (auto& v : value) v = rng->NextUint64().value();
  TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(index, value, rng.get()));
  std::vector<T> o0(dpf.domain_size()), o1(dpf.domain_size());
  std::vector<T> a0(dpf.domain_size(), T{3}), a1(dpf.domain_size(), T{0} - T{3});
  BlockDpfScratch scratch;
  ASSERT_THAT(dpf.EvaluateFullDomain<T>(keys.first, absl::MakeSpan(o0), &scratch), IsOk());
  ASSERT_THAT(dpf.EvaluateFullDomain<T>(keys.second, absl::MakeSpan(o1), &scratch), IsOk());
  ASSERT_THAT(dpf.EvaluateAndAdd<T>(keys.first, absl::MakeSpan(a0), &scratch), IsOk());
  ASSERT_THAT(dpf.EvaluateAndAdd<T>(keys.second, absl::MakeSpan(a1), &scratch), IsOk());
  for (uint64_t i = 0; i < dpf.domain_size(); ++i) {
    const uint64_t blk = i / b;
    const uint64_t want = blk == index ? value[i % b] & mask : 0;
    ASSERT_EQ((uint64_t{o0[i]} + o1[i]) & mask, want) << i;
    ASSERT_EQ((uint64_t{a0[i]} + a1[i]) & mask, want) << i;
  }
  std::vector<T> blk0(b), blk1(b);
  for (uint64_t blk : {index, (index + 1) % dpf.num_blocks()}) {
    ASSERT_THAT(dpf.EvaluateBlock<T>(keys.first, blk, absl::MakeSpan(blk0)), IsOk());
    ASSERT_THAT(dpf.EvaluateBlock<T>(keys.second, blk, absl::MakeSpan(blk1)), IsOk());
    for (size_t j = 0; j < b; ++j) {
      EXPECT_EQ(blk0[j], o0[blk * b + j]);
      EXPECT_EQ(blk1[j], o1[blk * b + j]);
    }
  }
  // Proof-only pass feeds the same transcript as the evaluating pass.
  auto s1 = internal::Sha256::Create().value();
  auto s2 = internal::Sha256::Create().value();
  ASSERT_THAT(dpf.FeedProof(keys.second, &scratch, &s1), IsOk());
  ASSERT_THAT(dpf.EvaluateAndAdd<T>(keys.first, absl::MakeSpan(a0), &scratch, &s2), IsOk());
  EXPECT_EQ(s1.Finish().value(), s2.Finish().value());
}

TEST_P(BlockDpfTest, SharesSumToTheBlock) {
  const auto [d, b, bits] = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(BlockDpf dpf, BlockDpf::Create(d, b, bits));
  CheckBlocks<uint64_t>(dpf, 1000 * d + 10 * b + bits);
  if (bits == 32) CheckBlocks<uint32_t>(dpf, 7 * d + b);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, BlockDpfTest,
    ::testing::Values(std::tuple{0, 1, 64}, std::tuple{3, 2, 64}, std::tuple{3, 4, 32},
                      std::tuple{4, 16, 64}, std::tuple{4, 8, 32}, std::tuple{2, 3, 64},
                      std::tuple{2, 5, 32}, std::tuple{5, 130, 64}, std::tuple{5, 132, 32},
                      std::tuple{11, 2, 64}, std::tuple{1, 1024, 64}, std::tuple{12, 1, 32}),
    [](const auto& info) {
      return absl::StrCat("d", std::get<0>(info.param), "_B", std::get<1>(info.param), "_b",
                          std::get<2>(info.param));
    });

// A value correction with bits above value_bits is refused, wherever in the
// block it sits; at 64 bits every value is in range.
TEST(BlockDpfValidateKeyTest, ValueCorrectionsWiderThanTheRingAreRefused) {
  TANDEM_ASSERT_OK_AND_ASSIGN(BlockDpf dpf32, BlockDpf::Create(3, 5, 32));
  auto rng = DeterministicRandom::FromSeed(9);
  const std::vector<uint64_t> value = {1, 2, 3, 4, 5};
  TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf32.GenerateKeys(2, value, rng.get()));
  ASSERT_THAT(dpf32.ValidateKey(keys.first), IsOk());
  for (size_t j = 0; j < value.size(); ++j) {
    BlockDpfKey wide = keys.first;
    wide.value_correction[j] |= uint64_t{1} << (32 + j);
    EXPECT_THAT(dpf32.ValidateKey(wide),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds 32 bits")))
        << j;
  }
  TANDEM_ASSERT_OK_AND_ASSIGN(BlockDpf dpf64, BlockDpf::Create(3, 5, 64));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto keys64, dpf64.GenerateKeys(2, value, rng.get()));
  keys64.first.value_correction[4] = ~uint64_t{0};
  EXPECT_THAT(dpf64.ValidateKey(keys64.first), IsOk());
}

}  // namespace
}  // namespace tandem::crypto
