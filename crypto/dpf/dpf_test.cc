// Point DPF: shares reconstruct the point function over many domain sizes,
// value widths and AES paths; point and full-domain evaluation agree;
// accumulation adds; bad input is rejected.
#include "crypto/dpf/dpf.h"

#include <tuple>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

// (log_domain_size, value_bits, path)
class DpfPropertyTest : public ::testing::TestWithParam<std::tuple<int, int, AesPath>> {};

template <typename T>
void CheckReconstruction(const Dpf& dpf, uint64_t seed) {
  auto rng = DeterministicRandom::FromSeed(seed);
  const uint64_t n = dpf.domain_size();
  const uint64_t mask = dpf.block_dpf().value_mask();
  std::vector<T> out0(n), out1(n), acc0(n, 7), acc1(n, 11);
  BlockDpfScratch scratch;
  for (int trial = 0; trial < 4; ++trial) {
    TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t r, rng->NextUint64());
    const uint64_t alpha = r % n;
    TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t beta, rng->NextUint64());
    SCOPED_TRACE(::testing::Message() << "alpha=" << alpha << " beta=" << beta);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(alpha, beta, rng.get()));
    ASSERT_THAT(dpf.EvaluateFullDomain<T>(keys.first, absl::MakeSpan(out0), &scratch), IsOk());
    ASSERT_THAT(dpf.EvaluateFullDomain<T>(keys.second, absl::MakeSpan(out1), &scratch), IsOk());
    ASSERT_THAT(dpf.EvaluateAndAdd<T>(keys.first, absl::MakeSpan(acc0), &scratch), IsOk());
    ASSERT_THAT(dpf.EvaluateAndAdd<T>(keys.second, absl::MakeSpan(acc1), &scratch), IsOk());
    size_t nonzero = 0;
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t sum = (static_cast<uint64_t>(out0[x]) + out1[x]) & mask;
      if (x == alpha) {
        EXPECT_EQ(sum, beta & mask);
      } else {
        nonzero += sum != 0;
      }
    }
    EXPECT_EQ(nonzero, 0u);
    // Point evaluation agrees with the full domain at alpha and a few others.
    for (uint64_t x : {alpha, (alpha + 1) % n, uint64_t{0}, n - 1}) {
      TANDEM_ASSERT_OK_AND_ASSIGN(T y0, dpf.EvaluateAt<T>(keys.first, x));
      TANDEM_ASSERT_OK_AND_ASSIGN(T y1, dpf.EvaluateAt<T>(keys.second, x));
      EXPECT_EQ(y0, out0[x]);
      EXPECT_EQ(y1, out1[x]);
    }
  }
  // The accumulators hold 7 + 11 plus the four point functions' sums.
  for (uint64_t x = 0; x < n; ++x) {
    EXPECT_LE(static_cast<uint64_t>(acc0[x]), mask);
  }
}

TEST_P(DpfPropertyTest, SharesSumToBetaAtAlphaAndZeroElsewhere) {
  const auto [log_n, bits, path] = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(Dpf dpf, Dpf::Create(log_n, bits, path));
  CheckReconstruction<uint64_t>(dpf, 100 * log_n + bits);
  if (bits == 32) CheckReconstruction<uint32_t>(dpf, 7 + log_n);
}

TEST_P(DpfPropertyTest, AccumulatorEqualsSumOfPointFunctions) {
  const auto [log_n, bits, path] = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(Dpf dpf, Dpf::Create(log_n, bits, path));
  auto rng = DeterministicRandom::FromSeed(555 + log_n);
  const uint64_t n = dpf.domain_size();
  const uint64_t mask = dpf.block_dpf().value_mask();
  std::vector<uint64_t> acc0(n), acc1(n), expected(n);
  BlockDpfScratch scratch;
  for (int i = 0; i < 5; ++i) {
    TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t r, rng->NextUint64());
    TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t beta, rng->NextUint64());
    TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(r % n, beta, rng.get()));
    expected[r % n] = (expected[r % n] + beta) & mask;
    ASSERT_THAT(dpf.EvaluateAndAdd<uint64_t>(keys.first, absl::MakeSpan(acc0), &scratch), IsOk());
    ASSERT_THAT(dpf.EvaluateAndAdd<uint64_t>(keys.second, absl::MakeSpan(acc1), &scratch),
                IsOk());
  }
  for (uint64_t x = 0; x < n; ++x) EXPECT_EQ((acc0[x] + acc1[x]) & mask, expected[x]) << x;
}

std::vector<std::tuple<int, int, AesPath>> Params() {
  std::vector<std::tuple<int, int, AesPath>> out;
  for (AesPath p : SupportedAesPaths()) {
    const std::vector<int> sizes =
        p == AesPath::kPortable ? std::vector<int>{0, 1, 2, 5} : std::vector<int>{0, 1, 2, 3, 7, 10, 11, 12, 15};
    for (int log_n : sizes) {
      for (int bits : {32, 64}) out.emplace_back(log_n, bits, p);
    }
  }
  return out;
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<int, int, AesPath>>& info) {
  return absl::StrCat("n", std::get<0>(info.param), "_b", std::get<1>(info.param), "_",
                      AesPathName(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Sweep, DpfPropertyTest, ::testing::ValuesIn(Params()), ParamName);

TEST(Dpf, KeysFromDifferentPathsAreIdentical) {
  std::vector<std::vector<uint64_t>> outs;
  for (AesPath p : SupportedAesPaths()) {
    TANDEM_ASSERT_OK_AND_ASSIGN(Dpf dpf, Dpf::Create(6, 64, p));
    auto rng = DeterministicRandom::FromSeed(3);
    TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(17, 99, rng.get()));
    std::vector<uint64_t> out(64);
    BlockDpfScratch scratch;
    ASSERT_THAT(dpf.EvaluateFullDomain<uint64_t>(keys.first, absl::MakeSpan(out), &scratch),
                IsOk());
    outs.push_back(out);
  }
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]);
}

TEST(Dpf, RejectsBadParametersAndInputs) {
  EXPECT_THAT(Dpf::Create(31, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Dpf::Create(-1, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Dpf::Create(10, 16), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(Dpf dpf, Dpf::Create(8, 64));
  auto rng = DeterministicRandom::FromSeed(1);
  EXPECT_THAT(dpf.GenerateKeys(256, 1, rng.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(dpf.GenerateKeys(1, 1, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(3, 1, rng.get()));
  std::vector<uint64_t> small(255);
  BlockDpfScratch scratch;
  EXPECT_THAT(dpf.EvaluateFullDomain<uint64_t>(keys.first, absl::MakeSpan(small), &scratch),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<uint32_t> narrow(256);
  EXPECT_THAT(dpf.EvaluateFullDomain<uint32_t>(keys.first, absl::MakeSpan(narrow), &scratch),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(dpf.EvaluateAt<uint64_t>(keys.first, 256),
              StatusIs(absl::StatusCode::kInvalidArgument));
  DpfKey bad = keys.first;
  bad.correction_words.pop_back();
  EXPECT_THAT(dpf.EvaluateAt<uint64_t>(bad, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = keys.first;
  bad.party = 2;
  std::vector<uint64_t> out(256);
  EXPECT_THAT(dpf.EvaluateFullDomain<uint64_t>(bad, absl::MakeSpan(out), &scratch),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto
