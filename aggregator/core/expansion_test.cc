// The fused evaluation of expansion.h and norm_verification.h: one pass per
// share gives the same digests, verifier shares and sums as the separate
// passes, SubtractShares undoes it exactly, errors leave nothing behind
// that a caller would keep.
#include "aggregator/core/expansion.h"

#include <vector>

#include "aggregator/core/norm_verification.h"
#include "aggregator/core/task.h"
#include "aggregator/testing/report_factory.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::aggregator::testing::MakeNormRoundParameters;
using ::tandem::aggregator::testing::MakeReport;
using ::tandem::aggregator::testing::MakeReportWithValues;
using ::tandem::aggregator::testing::MakeRoundParameters;
using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

std::vector<uint64_t> Pattern(uint64_t dim, uint64_t mask) {
  std::vector<uint64_t> v(dim);
  for (uint64_t i = 0; i < dim; ++i) v[i] = (i * 0x9e3779b97f4a7c15ULL + 11) & mask;
  return v;
}

class FusedExpansionTest : public ::testing::TestWithParam<int> {};

TEST_P(FusedExpansionTest, DigestsAndSumsEqualTheTwoPassPathAndUndoIsExact) {
  proto::RoundParameters params = MakeRoundParameters("t", 1, 5, 4, 3);
  params.mutable_group_parameters()->set_value_bits(static_cast<uint32_t>(GetParam()));
  AggregatorOptions options;
  TANDEM_ASSERT_OK_AND_ASSIGN(crypto::SparseDpf dpf, DpfForRound(params, options));
  const uint64_t mask = GetParam() == 64 ? ~uint64_t{0} : 0xffffffffULL;
  std::vector<proto::SparseKeySet> shares;
  auto rng = DeterministicRandom::FromSeed(GetParam());
  for (int report = 0; report < 7; ++report) {  // more reports than threads
    std::vector<uint32_t> index(dpf.num_groups());
    std::vector<uint64_t> values(size_t(dpf.num_groups()) * dpf.block_size());
    for (uint32_t& i : index) i = rng->NextUint64().value() % dpf.blocks_per_group();
    for (uint64_t& v : values) v = rng->NextUint64().value();
    TANDEM_ASSERT_OK_AND_ASSIGN(auto keys, dpf.GenerateKeys(index, values, rng.get()));
    shares.push_back(report % 2 == 0 ? keys.first : keys.second);
  }
  std::vector<const proto::SparseKeySet*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);

  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<crypto::ProofDigest> separate,
                              ComputeDigests(dpf, ptrs));
  std::vector<uint64_t> two_pass = Pattern(dpf.dimension(), mask);
  TANDEM_ASSERT_OK(AccumulateShares(dpf, ptrs, absl::MakeSpan(two_pass)));

  const std::vector<uint64_t> start = Pattern(dpf.dimension(), mask);
  std::vector<uint64_t> fused = start;
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<crypto::ProofDigest> digests,
                              ComputeDigests(dpf, ptrs, absl::MakeSpan(fused)));
  EXPECT_EQ(digests, separate);
  EXPECT_EQ(fused, two_pass);
  // Taking every share back out returns the starting accumulator; taking
  // out a subset leaves exactly the others.
  std::vector<uint64_t> undone = fused;
  TANDEM_ASSERT_OK(SubtractShares(dpf, ptrs, absl::MakeSpan(undone)));
  EXPECT_EQ(undone, start);
  std::vector<uint64_t> partial = fused;
  TANDEM_ASSERT_OK(SubtractShares(dpf, absl::MakeConstSpan(ptrs).subspan(2),
                                  absl::MakeSpan(partial)));
  std::vector<uint64_t> first_two = start;
  TANDEM_ASSERT_OK(AccumulateShares(dpf, absl::MakeConstSpan(ptrs).first(2),
                                    absl::MakeSpan(first_two)));
  EXPECT_EQ(partial, first_two);
}

INSTANTIATE_TEST_SUITE_P(ValueBits, FusedExpansionTest, ::testing::Values(32, 64));

TEST(FusedExpansion, SizeErrorsAndBadSharesAreRefused) {
  const proto::RoundParameters params = MakeRoundParameters("t", 1, 3, 2, 2);
  AggregatorOptions options;
  TANDEM_ASSERT_OK_AND_ASSIGN(crypto::SparseDpf dpf, DpfForRound(params, options));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, MakeReport(params, 5));
  const proto::SparseKeySet* share = &r.to_leader.key_share();
  std::vector<uint64_t> short_acc(dpf.dimension() - 1, 0);
  EXPECT_THAT(ComputeDigests(dpf, {share}, absl::MakeSpan(short_acc)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SubtractShares(dpf, {share}, absl::MakeSpan(short_acc)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::SparseKeySet bad = *share;
  bad.mutable_keys()->RemoveLast();
  std::vector<uint64_t> acc(dpf.dimension(), 1);
  EXPECT_THAT(SubtractShares(dpf, {&bad}, absl::MakeSpan(acc)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(acc, std::vector<uint64_t>(dpf.dimension(), 1));  // unchanged
  EXPECT_THAT(ComputeDigests(dpf, {share, &bad}, absl::MakeSpan(acc)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FusedExpansion, NormChecksWithAccumulatorMatchTheCheckOnlyPath) {
  constexpr uint32_t kLogBlocks = 3, kBlock = 8, kGroups = 4;
  const proto::RoundParameters params =
      MakeNormRoundParameters("t", 1, kLogBlocks, kBlock, kGroups, 200, 500);
  AggregatorOptions options;
  TANDEM_ASSERT_OK_AND_ASSIGN(crypto::SparseDpf dpf, DpfForRound(params, options));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto proof, ProofForRound(params));
  ASSERT_NE(proof, nullptr);
  const std::string seed(crypto::proof::kQuerySeedBytes, 'q');
  for (int party : {0, 1}) {
    std::vector<ParsedShare> parsed;
    std::vector<std::string> ids;
    for (uint64_t s = 1; s <= 5; ++s) {
      std::vector<int64_t> values(kGroups * kBlock);
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>((i + s) % 5) - 2;
      TANDEM_ASSERT_OK_AND_ASSIGN(auto r, MakeReportWithValues(params, values, s));
      const proto::UploadRequest& u = party == 0 ? r.to_leader : r.to_helper;
      ParsedShare p;
      *p.mutable_keys() = u.key_share();
      *p.mutable_proof() = u.norm_proof();
      parsed.push_back(std::move(p));
      ids.push_back(u.report_id());
    }
    std::vector<const ParsedShare*> ptrs;
    std::vector<const proto::SparseKeySet*> keys;
    for (const ParsedShare& p : parsed) {
      ptrs.push_back(&p);
      keys.push_back(&p.keys());
    }
    TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<NormEvaluation> check_only,
                                EvaluateNormChecks(dpf, *proof, party, ptrs, ids, seed));
    std::vector<uint64_t> fused(dpf.dimension(), 0), two_pass(dpf.dimension(), 0);
    TANDEM_ASSERT_OK_AND_ASSIGN(
        std::vector<NormEvaluation> with_sum,
        EvaluateNormChecks(dpf, *proof, party, ptrs, ids, seed, absl::MakeSpan(fused)));
    TANDEM_ASSERT_OK(AccumulateShares(dpf, keys, absl::MakeSpan(two_pass)));
    EXPECT_EQ(fused, two_pass) << party;
    ASSERT_EQ(with_sum.size(), check_only.size());
    for (size_t i = 0; i < with_sum.size(); ++i) {
      EXPECT_EQ(with_sum[i].digest, check_only[i].digest);
      EXPECT_EQ(with_sum[i].verifier.SerializeAsString(),
                check_only[i].verifier.SerializeAsString());
    }
  }
}

}  // namespace
}  // namespace tandem::aggregator
