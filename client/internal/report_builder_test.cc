#include "client/internal/report_builder.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/public_digest.h"
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
    std::vector<uint64_t> expansion(b.dpf().dimension(), 0),
        derived(sys.circuit().derived_length());
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
    for (float& x : update)
      x = static_cast<float>(int64_t(rng->NextUint64().value() % 2001) - 1000) / 100.0f;
    auto r = builder->Build(update, rng.get());
    ASSERT_THAT(r.status(), IsOk());
    ASSERT_TRUE(r->leader_proof.has_value() && r->helper_proof.has_value());
    EXPECT_TRUE(ServersAccept(*builder, sys, *r)) << trial;
    EXPECT_GT(r->upload_bytes, r->leader_share.ByteSizeLong() + r->helper_share.ByteSizeLong());
    // The P the proof hashed rides along to the device's signatures.
    const crypto::ProofDigest p_leader = crypto::PublicPartsDigest(r->leader_share).value();
    ASSERT_TRUE(r->public_digest.has_value());
    EXPECT_EQ(*r->public_digest, p_leader);
    EXPECT_EQ(MakeUploadRequests(*std::move(r), "t", 1).public_digest, p_leader);
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
  EXPECT_FALSE(r->public_digest.has_value());  // no proof hashed it
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

TEST(ReportBuilder, TopNormSendsTheLargestBlockOfEachGroupClippedAlone) {
  ReportParameters p = Params();
  p.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  p.clip_l2_norm = 1.0;
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(p));
  std::vector<float> update(64, 0.05f);  // ||update|| = 0.4 < C
  for (int j = 0; j < 4; ++j) {
    update[5 * 4 + j] = 0.2f;        // group 0, block 5
    update[32 + 2 * 4 + j] = -0.1f;  // group 1, block 2
  }
  auto rng = DeterministicRandom::FromSeed(9);
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get()));
  EXPECT_THAT(r.block_indices, ::testing::ElementsAre(5, 2));
  std::vector<double> got = Reconstruct(builder, r);
  for (int i = 0; i < 64; ++i) {
    const bool sent = (i >= 20 && i < 24) || (i >= 40 && i < 44);
    EXPECT_NEAR(got[i], sent ? update[i] : 0.0, 1e-4) << i;
  }
  EXPECT_EQ(r.clip_factor, 1.0);
  // The same input gives the same choice whatever the randomness.
  auto other = DeterministicRandom::FromSeed(10);
  EXPECT_EQ(builder.Build(update, other.get())->block_indices, r.block_indices);

  // Large: the sent blocks (norm sqrt(8) * 5) are clipped to C alone, not
  // with the whole update (norm sqrt(8 * 25 + 56)).
  std::vector<float> big(64, 1.0f);
  for (int j = 0; j < 4; ++j) big[3 * 4 + j] = big[32 + 7 * 4 + j] = 5.0f;
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport rb, builder.Build(big, rng.get()));
  EXPECT_THAT(rb.block_indices, ::testing::ElementsAre(3, 7));
  EXPECT_NEAR(rb.clip_factor, 1.0 / std::sqrt(8 * 25.0), 1e-9);
  got = Reconstruct(builder, rb);
  double norm_sq = 0;
  for (double x : got) norm_sq += x * x;
  EXPECT_NEAR(std::sqrt(norm_sq), 1.0, 1e-3);
}

TEST(ReportBuilder, TopNormReportsPassTheNormProof) {
  ReportParameters p = Params();
  p.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
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
  for (int trial = 0; trial < 3; ++trial) {
    // Norms up to ~8 C over the whole update; the selected blocks are
    // clipped to C, so the report is within the bound.
    std::vector<float> update(p.dimension);
    for (float& x : update) {
      x = static_cast<float>(int64_t(rng->NextUint64().value() % 2001) - 1000) / 100.0f;
    }
    TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport r, builder.Build(update, rng.get()));
    EXPECT_TRUE(ServersAccept(builder, sys, r)) << trial;
  }
}

TEST(ReportBuilder, BlockSelectionComesFromTheRound) {
  proto::RoundParameters round;
  EXPECT_EQ(ReportParametersFromRound(round).block_selection, proto::BLOCK_SELECTION_RANDOM);
  round.set_block_selection(proto::BLOCK_SELECTION_TOP_NORM);
  EXPECT_EQ(ReportParametersFromRound(round).block_selection, proto::BLOCK_SELECTION_TOP_NORM);
  ReportParameters p = Params();
  p.block_selection = static_cast<proto::BlockSelection>(7);
  EXPECT_THAT(ReportBuilder::Create(p).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A StateStore in memory (what a file store would keep across a restart).
class MapStore : public StateStore {
 public:
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override {
    auto it = map_.find(key);
    if (it == map_.end()) return std::optional<std::string>();
    return it->second;
  }
  absl::Status Put(const std::string& key, const std::string& value) override {
    map_[key] = value;
    return absl::OkStatus();
  }
  absl::Status Delete(const std::string& key) override {
    map_.erase(key);
    return absl::OkStatus();
  }

 private:
  std::map<std::string, std::string> map_;
};

TEST(ReportBuilder, ErrorFeedbackSurvivesARestartThroughTheStore) {
  ReportParameters p = Params();
  p.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder builder, ReportBuilder::Create(p));
  std::vector<float> update(64);
  for (int i = 0; i < 64; ++i) update[i] = 0.01f * ((i * 37) % 64) - 0.3f;
  MapStore store;
  auto rng = DeterministicRandom::FromSeed(4);
  ErrorFeedback before_crash;
  TANDEM_ASSERT_OK_AND_ASSIGN(
      BuiltReport first,
      BuildWithErrorFeedback(builder, "t", update, rng.get(), "", &before_crash, &store));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                              UnsentResidual(update, first.block_indices, builder.geometry()));
  EXPECT_EQ(before_crash.residual(), want);
  // A new process: empty memory, same store. A zero update sends the
  // largest blocks of the stored residual.
  ErrorFeedback after_restart;
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport second,
                              BuildWithErrorFeedback(builder, "t", std::vector<float>(64, 0.0f),
                                                     rng.get(), "", &after_restart, &store));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> top,
                              SelectTopNormBlocks(want, builder.geometry()));
  EXPECT_EQ(second.block_indices, top);
  const std::vector<double> got = Reconstruct(builder, second);
  double sent_norm = 0;
  for (int i = 0; i < 64; ++i) sent_norm += got[i] * got[i];
  EXPECT_GT(sent_norm, 0.0);
  for (int i = 0; i < 64; ++i) {
    if (got[i] != 0) {
      EXPECT_NEAR(got[i], want[i], 1e-4) << i;
    }
  }
  // Another task's residual is not applied; random rounds ignore the memory.
  ErrorFeedback other;
  TANDEM_ASSERT_OK_AND_ASSIGN(BuiltReport third,
                              BuildWithErrorFeedback(builder, "u", std::vector<float>(64, 0.0f),
                                                     rng.get(), "", &other, &store));
  for (double x : Reconstruct(builder, third)) EXPECT_EQ(x, 0.0);
  TANDEM_ASSERT_OK_AND_ASSIGN(ReportBuilder random, ReportBuilder::Create(Params()));
  ErrorFeedback untouched;
  ASSERT_TRUE(BuildWithErrorFeedback(random, "u", update, rng.get(), "", &untouched, &store).ok());
  EXPECT_TRUE(untouched.empty());
}

}  // namespace
}  // namespace tandem::client
