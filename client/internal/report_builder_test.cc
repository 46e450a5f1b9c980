#include "client/internal/report_builder.h"

#include <cmath>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

ReportParameters Params() {
  ReportParameters p;
  p.block_size = 4;
  p.num_groups = 2;
  p.log_num_blocks = 3;  // 8 blocks per group
  p.dimension = 2 * 8 * 4;
  p.frac_bits = 16;
  p.clip_l2_norm = 10.0;
  p.max_summands = 1000;
  return p;
}

// Both shares expanded and added: the encoded vector the servers would sum.
std::vector<double> Reconstruct(const ReportBuilder& b, const BuiltReport& r) {
  std::vector<uint64_t> acc(b.dpf().dimension(), 0);
  crypto::SparseDpfScratch scratch;
  EXPECT_THAT(b.dpf().EvaluateAndAccumulate(r.leader_share, absl::MakeSpan(acc), &scratch), IsOk());
  EXPECT_THAT(b.dpf().EvaluateAndAccumulate(r.helper_share, absl::MakeSpan(acc), &scratch), IsOk());
  std::vector<double> out(acc.size());
  EXPECT_THAT(b.codec().Decode(acc, absl::MakeSpan(out)), IsOk());
  return out;
}

TEST(ReportBuilder, EachGroupCarriesOneBlockOfTheUpdate) {
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(Params()));
  std::vector<float> update(64);
  for (int i = 0; i < 64; ++i) update[i] = 0.01f * (i + 1);
  auto rng = DeterministicRandom::FromSeed(5);
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get()));
  EXPECT_EQ(r.clip_factor, 1.0);
  EXPECT_EQ(r.report_id.size(), 16u);
  const std::vector<double> got = Reconstruct(builder, r);
  for (int g = 0; g < 2; ++g) {
    int nonzero_blocks = 0;
    for (int blk = 0; blk < 8; ++blk) {
      bool nonzero = false;
      for (int j = 0; j < 4; ++j) {
        const int i = g * 32 + blk * 4 + j;
        if (got[i] != 0) {
          nonzero = true;
          EXPECT_NEAR(got[i], update[i], 1e-4) << i;
        }
      }
      nonzero_blocks += nonzero;
    }
    EXPECT_EQ(nonzero_blocks, 1) << "group " << g;
  }
}

TEST(ReportBuilder, ScaledMeanOfReportsIsUnbiased) {
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(Params()));
  std::vector<float> update(64);
  for (int i = 0; i < 64; ++i) update[i] = std::sin(0.3 * i);
  auto rng = DeterministicRandom::FromSeed(6);
  std::vector<double> mean(64, 0);
  const int n = 800;
  for (int t = 0; t < n; ++t) {
    TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get()));
    const std::vector<double> got = Reconstruct(builder, r);
    for (int i = 0; i < 64; ++i) mean[i] += got[i] * 8 / n;  // * blocks_per_group
  }
  // Each coordinate is update * 8 * Bernoulli(1/8): std of the mean is
  // |u| * sqrt(7 / n) <= 0.094; 5 sigma.
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(mean[i], update[i], 0.47) << i;
  double err = 0;
  for (int i = 0; i < 64; ++i) err += std::abs(mean[i] - update[i]);
  EXPECT_LT(err / 64, 0.12);
}

TEST(ReportBuilder, ClipsLargeUpdates) {
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(Params()));
  std::vector<float> update(64, 5.0f);  // norm 40 > C = 10
  auto rng = DeterministicRandom::FromSeed(7);
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get()));
  EXPECT_NEAR(r.clip_factor, 0.25, 1e-9);
  for (double v : Reconstruct(builder, r)) {
    if (v != 0) {
      EXPECT_NEAR(v, 1.25, 1e-4);
    }
  }
}

TEST(ReportBuilder, ParametersFromTheAnnouncedRound) {
  proto::RoundParameters round;
  round.set_dimension(64);
  round.mutable_group_parameters()->set_block_size(4);
  round.mutable_group_parameters()->set_log_num_blocks(3);
  round.set_num_groups(2);
  round.mutable_fixed_point()->set_fractional_bits(12);
  round.mutable_fixed_point()->set_clip_l2_norm(3.5);
  const ReportParameters p = ReportParametersFromRound(round);
  EXPECT_EQ(p.dimension, 64u);
  EXPECT_EQ(p.block_size, 4u);
  EXPECT_EQ(p.log_num_blocks, 3u);
  EXPECT_EQ(p.num_groups, 2u);
  EXPECT_EQ(p.frac_bits, 12);
  EXPECT_EQ(p.clip_l2_norm, 3.5);
  EXPECT_EQ(p.max_summands, 1u);  // max_reports unset
  round.set_max_reports(500);
  EXPECT_EQ(ReportParametersFromRound(round).max_summands, 500u);
  EXPECT_THAT(ReportBuilder::Create(ReportParametersFromRound(round)), IsOk());
}

TEST(ReportBuilder, RejectsBadInput) {
  ReportParameters p = Params();
  p.dimension = 65;
  EXPECT_THAT(ReportBuilder::Create(p), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(Params()));
  auto rng = DeterministicRandom::FromSeed(8);
  std::vector<float> too_long(65, 0.f);
  EXPECT_THAT(builder.Build(too_long, rng.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<float> nan(3, std::nanf(""));
  EXPECT_THAT(builder.Build(nan, rng.get()), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Both servers' side of a norm proof: expansion, derived shares, query at
// one seed, joint decision.
bool ServersAccept(const ReportBuilder& b, const crypto::proof::NormProofSystem& sys,
                   const BuiltReport& r) {
  crypto::SparseDpfScratch scratch;
  proto::NormProofVerifierShare v[2];
  for (int party = 0; party < 2; ++party) {
    const proto::SparseKeySet& keys = party == 0 ? r.leader_share : r.helper_share;
    const proto::NormProofShare& share = party == 0 ? *r.leader_proof : *r.helper_proof;
    std::vector<uint64_t> expansion(b.dpf().dimension(), 0), derived(sys.circuit().derived_length());
    auto digest = b.dpf().EvaluateAndAccumulate(keys, absl::MakeSpan(expansion), &scratch);
    EXPECT_THAT(digest.status(), IsOk());
    if (!digest.ok()) return false;
    EXPECT_THAT(sys.DeriveInputShare(party, expansion, absl::MakeSpan(derived)), IsOk());
    auto s = sys.Query(party, r.report_id, keys, share, derived, *digest, std::string(32, 's'));
    EXPECT_THAT(s.status(), IsOk());
    if (!s.ok()) return false;
    v[party] = *s;
  }
  return sys.Decide(v[0], v[1]);
}

TEST(ReportBuilder, NormBoundRoundsCarryProofsTheServersAccept) {
  ReportParameters p = Params();
  const uint64_t bound = crypto::proof::L2SquaredBoundForClip(p.clip_l2_norm, p.frac_bits, 8);
  proto::NormBoundParameters nb;
  nb.set_max_block_l2_squared(bound);
  nb.set_max_l2_squared(bound);
  p.norm_bound = nb;
  auto builder = ReportBuilder::Create(p);
  ASSERT_THAT(builder.status(), IsOk());
  proto::BlockDpfParameters g;
  g.set_log_num_blocks(p.log_num_blocks);
  g.set_block_size(p.block_size);
  g.set_value_bits(64);
  auto sys = crypto::proof::NormProofSystem::Create(g, p.num_groups, nb).value();
  auto rng = DeterministicRandom::FromSeed(17);
  for (int trial = 0; trial < 4; ++trial) {
    // Updates of norm up to 4 C: clipped to C, so always within the bound.
    std::vector<float> update(p.dimension);
    for (float& x : update) x = static_cast<float>(int64_t(rng->NextUint64().value() % 2001) - 1000) / 100.0f;
    auto r = builder->Build(update, rng.get());
    ASSERT_THAT(r.status(), IsOk());
    ASSERT_TRUE(r->leader_proof.has_value() && r->helper_proof.has_value());
    EXPECT_TRUE(ServersAccept(*builder, sys, *r)) << trial;
    EXPECT_GT(r->upload_bytes, r->leader_share.ByteSizeLong() + r->helper_share.ByteSizeLong());
  }
  // A bound tighter than the clip: the honest client cannot prove.
  nb.set_max_l2_squared(1);
  p.norm_bound = nb;
  auto tight = ReportBuilder::Create(p).value();
  std::vector<float> big(p.dimension, 5.0f);
  EXPECT_THAT(tight.Build(big, rng.get()).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // Rounds without a norm bound: no proofs, as before.
  auto plain = ReportBuilder::Create(Params()).value();
  auto r = plain.Build(big, rng.get());
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_FALSE(r->leader_proof.has_value());
}

TEST(ReportBuilder, ReportsGoUnderTheTicketIdAndCarryTheTicket) {
  ReportParameters p = Params();
  const uint64_t bound = crypto::proof::L2SquaredBoundForClip(p.clip_l2_norm, p.frac_bits, 8);
  proto::NormBoundParameters nb;
  nb.set_max_block_l2_squared(bound);
  nb.set_max_l2_squared(bound);
  p.norm_bound = nb;
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(p));
  proto::BlockDpfParameters g;
  g.set_log_num_blocks(p.log_num_blocks);
  g.set_block_size(p.block_size);
  g.set_value_bits(64);
  auto sys = crypto::proof::NormProofSystem::Create(g, p.num_groups, nb).value();
  auto rng = DeterministicRandom::FromSeed(23);
  const std::string id = "0123456789abcdef";
  std::vector<float> update(p.dimension, 0.01f);
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get(), id));
  EXPECT_EQ(r.report_id, id);
  EXPECT_TRUE(ServersAccept(builder, sys, r));  // the proofs bind the ticket id
  EXPECT_THAT(builder.Build(update, rng.get(), "short").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::SignedUploadTicket ticket;
  ticket.set_ticket("ticket bytes");
  ticket.set_signature(std::string(64, 's'));
  const UploadRequests u = MakeUploadRequests(std::move(r), "t", 9, ticket);
  for (const proto::UploadRequest* req : {&u.to_leader, &u.to_helper}) {
    EXPECT_EQ(req->report_id(), id);
    EXPECT_EQ(req->round_id(), 9u);
    EXPECT_EQ(req->ticket().SerializeAsString(), ticket.SerializeAsString());
  }
  EXPECT_TRUE(u.to_leader.has_norm_proof() && u.to_helper.has_norm_proof());
}

TEST(ReportBuilder, RefusesDimensionsBeyondItsBoundBeforeAllocating) {
  ReportParameters p;
  p.num_groups = 4096;
  p.block_size = 1 << 20;
  p.log_num_blocks = 24;
  p.dimension = uint64_t{1} << 56;  // 2^12 * 2^20 * 2^24: consistent, absurd
  EXPECT_THAT(ReportBuilder::Create(p),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("outside")));
  // Factors whose 64-bit product wraps to D are not a match.
  p.dimension = 64;
  p.num_groups = 1u << 31;
  p.block_size = 1u << 31;
  p.log_num_blocks = 2;
  EXPECT_THAT(ReportBuilder::Create(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = Params();
  p.max_dimension = 32;
  EXPECT_THAT(ReportBuilder::Create(p), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ReportBuilder, RoundNormBoundReachesTheParameters) {
  proto::RoundParameters round;
  EXPECT_FALSE(ReportParametersFromRound(round).norm_bound.has_value());
  round.mutable_norm_bound()->set_max_l2_squared(5);
  ASSERT_TRUE(ReportParametersFromRound(round).norm_bound.has_value());
  EXPECT_EQ(ReportParametersFromRound(round).norm_bound->max_l2_squared(), 5u);
}

}  // namespace
}  // namespace tandem::client
