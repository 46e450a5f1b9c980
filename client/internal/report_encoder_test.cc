// The SDK's public C++ API and C ABI: what they emit is exactly what the
// aggregators accept and what reconstructs the clipped update's blocks.
#include "tandem/client/report_encoder.h"

#include <cstring>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/fixed_point/fixed_point.h"
#include "crypto/proof/norm_proof.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.pb.h"
#include "tandem/client/c_api.h"

namespace tandem::client {
namespace {

using ::tandem::testing::StatusIs;

RoundSpec Spec() {
  RoundSpec s;
  s.task_id = "app-task";
  s.round_id = 3;
  s.block_size = 8;
  s.num_groups = 2;
  s.log_num_blocks = 2;
  s.dimension = 2 * 4 * 8;
  s.clip_l2_norm = 100;
  s.max_summands = 10;
  return s;
}

// Decodes the two serialized uploads back to the vector they share.
std::vector<double> Reconstruct(const std::string& a, const std::string& b) {
  auto dpf = crypto::SparseDpf::Create(64, 8, 2, 64);
  EXPECT_THAT(dpf.status(), ::tandem::testing::IsOk());
  std::vector<uint64_t> acc(64, 0);
  crypto::SparseDpfScratch scratch;
  for (const std::string* wire : {&a, &b}) {
    proto::UploadRequest req;
    EXPECT_TRUE(req.ParseFromString(*wire));
    EXPECT_THAT(crypto::ValidateSparseKeySet(req.key_share(), dpf->Shape()),
                ::tandem::testing::IsOk());
    EXPECT_THAT(dpf->EvaluateAndAccumulate(req.key_share(), absl::MakeSpan(acc), &scratch).status(),
                ::tandem::testing::IsOk());
  }
  auto codec = crypto::FixedPointCodec::Create(16, 100, 10, 64);
  std::vector<double> out(64);
  EXPECT_THAT(codec->Decode(acc, absl::MakeSpan(out)), ::tandem::testing::IsOk());
  return out;
}

// The round as announced: the same reconstruction, and norm proofs in both
// requests when the round has a norm bound.
TEST(ReportEncoder, CreateForRoundFollowsTheAnnouncedRound) {
  proto::RoundParameters rp;
  rp.set_task_id("app-task");
  rp.set_round_id(3);
  rp.set_dimension(64);
  rp.set_num_groups(2);
  rp.mutable_group_parameters()->set_block_size(8);
  rp.mutable_group_parameters()->set_log_num_blocks(2);
  rp.mutable_group_parameters()->set_value_bits(64);
  rp.set_max_reports(10);
  rp.mutable_fixed_point()->set_fractional_bits(16);
  rp.mutable_fixed_point()->set_clip_l2_norm(100);
  auto rng = DeterministicRandom::FromSeed(4);
  TANDEM_ASSERT_OK_AND_ASSIGN(
      auto encoder, ReportEncoder::CreateForRound(rp.SerializeAsString(), 1 << 24, rng.get()));
  std::vector<float> update(64, 1.0f);
  TANDEM_ASSERT_OK_AND_ASSIGN(EncodedReport r, encoder->Encode(update));
  int nonzero = 0;
  for (double v : Reconstruct(r.to_leader, r.to_helper)) nonzero += v != 0;
  EXPECT_EQ(nonzero, 16);  // one block of 8 in each of the 2 groups
  proto::UploadRequest a;
  ASSERT_TRUE(a.ParseFromString(r.to_leader));
  EXPECT_EQ(a.task_id(), "app-task");
  EXPECT_FALSE(a.has_norm_proof());

  const uint64_t bound = crypto::proof::L2SquaredBoundForClip(100, 16, 16);
  rp.mutable_norm_bound()->set_max_l2_squared(bound);
  rp.mutable_norm_bound()->set_max_block_l2_squared(bound);
  TANDEM_ASSERT_OK_AND_ASSIGN(encoder, ReportEncoder::CreateForRound(rp.SerializeAsString()));
  TANDEM_ASSERT_OK_AND_ASSIGN(r, encoder->Encode(update));
  ASSERT_TRUE(a.ParseFromString(r.to_leader));
  EXPECT_TRUE(a.has_norm_proof());

  EXPECT_THAT(ReportEncoder::CreateForRound("not a proto \xff\xff").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ReportEncoder::CreateForRound(rp.SerializeAsString(), 32).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // D above max_dimension
}

TEST(ReportEncoder, EmitsUploadsThatReconstructOneBlockPerGroup) {
  auto rng = DeterministicRandom::FromSeed(4);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto encoder, ReportEncoder::Create(Spec(), rng.get()));
  std::vector<float> update(60);
  for (int i = 0; i < 60; ++i) update[i] = 0.5f + i;
  TANDEM_ASSERT_OK_AND_ASSIGN(EncodedReport r, encoder->Encode(update));
  proto::UploadRequest leader;
  ASSERT_TRUE(leader.ParseFromString(r.to_leader));
  EXPECT_EQ(leader.task_id(), "app-task");
  EXPECT_EQ(leader.round_id(), 3u);
  EXPECT_EQ(leader.report_id(), r.report_id);
  EXPECT_EQ(r.report_id.size(), 16u);
  const std::vector<double> v = Reconstruct(r.to_leader, r.to_helper);
  int nonzero = 0;
  for (int i = 0; i < 64; ++i) {
    if (v[i] != 0) {
      ++nonzero;
      EXPECT_NEAR(v[i], i < 60 ? update[i] * r.clip_factor : 0, 1e-3) << i;
    }
  }
  EXPECT_EQ(nonzero, 16);  // one block of 8 per group, two groups (update has no zeros)
}

TEST(ReportEncoder, TopNormSendsTheLargestBlocksAndReturnsTheResidual) {
  auto rng = DeterministicRandom::FromSeed(4);
  RoundSpec spec = Spec();
  spec.block_selection = BlockSelection::kTopNorm;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto encoder, ReportEncoder::Create(spec, rng.get()));
  std::vector<float> update(60);
  // Group 0: block 3 is the largest; group 1 (entries 32..59): block 2, as
  // block 3 has only 4 entries (the rest is padding).
  for (int i = 0; i < 60; ++i) update[i] = 0.5f + (i % 32);
  TANDEM_ASSERT_OK_AND_ASSIGN(EncodedReport r, encoder->Encode(update));
  ASSERT_EQ(r.residual.size(), 60u);
  const std::vector<double> v = Reconstruct(r.to_leader, r.to_helper);
  for (int i = 0; i < 60; ++i) {
    const bool sent = (i >= 24 && i < 32) || (i >= 48 && i < 56);
    EXPECT_NEAR(v[i], sent ? update[i] * r.clip_factor : 0.0, 1e-3) << i;
    EXPECT_EQ(r.residual[i], sent ? 0.0f : update[i]) << i;
  }
  // Random selection returns no residual.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto plain, ReportEncoder::Create(Spec(), rng.get()));
  EXPECT_TRUE(plain->Encode(update)->residual.empty());
}

TEST(ReportEncoder, RejectsBadSpecsAndUpdates) {
  RoundSpec bad = Spec();
  bad.dimension = 63;
  EXPECT_THAT(ReportEncoder::Create(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = Spec();
  bad.task_id.clear();
  EXPECT_THAT(ReportEncoder::Create(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto encoder, ReportEncoder::Create(Spec()));
  EXPECT_THAT(encoder->Encode(std::vector<float>(65)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CApi, EncodesAndReportsErrors) {
  tandem_round_spec spec = {"app-task", 3, 64, 8, 2, 2, 16, 100.0, 10};
  tandem_report_encoder* enc = nullptr;
  char err[128] = {0};
  ASSERT_EQ(tandem_report_encoder_create(&spec, &enc, err, sizeof(err)), 0) << err;
  std::vector<float> update(64, 0.25f);
  uint8_t id[16];
  tandem_buffer a{}, b{};
  ASSERT_EQ(
      tandem_report_encoder_encode(enc, update.data(), update.size(), id, &a, &b, err, sizeof(err)),
      0)
      << err;
  const std::vector<double> v = Reconstruct(std::string(reinterpret_cast<char*>(a.data), a.size),
                                            std::string(reinterpret_cast<char*>(b.data), b.size));
  int nonzero = 0;
  for (double x : v) nonzero += x != 0;
  EXPECT_EQ(nonzero, 16);
  proto::UploadRequest req;
  ASSERT_TRUE(req.ParseFromArray(a.data, static_cast<int>(a.size)));
  EXPECT_EQ(std::memcmp(req.report_id().data(), id, 16), 0);
  tandem_buffer_free(&a);
  tandem_buffer_free(&b);
  EXPECT_EQ(a.data, nullptr);
  // Too long an update: INVALID_ARGUMENT (3) with a message.
  std::vector<float> big(65, 0.f);
  EXPECT_EQ(tandem_report_encoder_encode(enc, big.data(), big.size(), id, &a, &b, err, sizeof(err)),
            3);
  EXPECT_THAT(std::string(err), ::testing::HasSubstr("65"));
  tandem_report_encoder_destroy(enc);
  spec.dimension = 10;
  EXPECT_EQ(tandem_report_encoder_create(&spec, &enc, err, sizeof(err)), 3);
  EXPECT_EQ(tandem_report_encoder_create(nullptr, &enc, nullptr, 0), 3);
}

}  // namespace
}  // namespace tandem::client
