// The coordinator's per-round encoding choice (server/core/secure_sum.h):
// its byte counts are those of the reports clients really build, the
// choice is the smaller one, and a dense round's sum decodes to the plain
// sum of the clipped updates like a PREAMBLE round's.
#include <cstdint>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "client/internal/report_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/secure_sum.h"

namespace tandem::sim {
namespace {

using server::EncodingChoice;
using server::SecureSum;
using server::SecureSumConfig;

SecureSumConfig Config(uint64_t dim, uint32_t log_blocks, bool proofs, EncodingChoice choice) {
  SecureSumConfig c;
  c.task_id = "t";
  c.model_dimension = dim;
  c.block_size = 64;
  c.log_blocks_per_group = log_blocks;
  c.clip_l2_norm = 2.0;
  c.max_reports = 100;
  c.norm_proofs = proofs;
  c.encoding = choice;
  return c;
}

// What a client builds for the round: its upload_bytes.
uint64_t BuiltBytes(const SecureSum& sum) {
  auto builder =
      client::ReportBuilder::Create(client::ReportParametersFromRound(sum.RoundParameters(1)));
  EXPECT_THAT(builder, ::tandem::testing::IsOk());
  std::vector<float> update(sum.config().model_dimension, 0.01f);
  auto report = builder->Build(update, OpenSslRandom::Default());
  EXPECT_THAT(report, ::tandem::testing::IsOk());
  return report->upload_bytes;
}

TEST(EncodingChoiceTest, ByteCountsAreWhatClientsBuild) {
  for (bool proofs : {false, true}) {
    for (uint32_t d : {0u, 1u, 3u}) {
      for (uint32_t w : {32u, 64u}) {
        SCOPED_TRACE(::testing::Message() << "proofs=" << proofs << " d=" << d << " w=" << w);
        SecureSumConfig pre_config = Config(3000, d, proofs, EncodingChoice::kPreamble);
        SecureSumConfig dense_config = Config(3000, d, proofs, EncodingChoice::kDense);
        pre_config.value_bits = dense_config.value_bits = w;
        TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum pre, SecureSum::Create(pre_config));
        TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum dense, SecureSum::Create(dense_config));
        EXPECT_EQ(pre.RoundParameters(1).group_parameters().value_bits(), w);
        EXPECT_EQ(dense.RoundParameters(1).group_parameters().value_bits(), w);
        EXPECT_EQ(pre.encoding(), proto::REPORT_ENCODING_PREAMBLE);
        EXPECT_EQ(dense.encoding(), proto::REPORT_ENCODING_DENSE);
        EXPECT_EQ(dense.padded_dimension(), 3000u);  // no padding
        // Within 0.5 % (the proof's few varint lengths are estimated).
        const double pre_built = static_cast<double>(BuiltBytes(pre));
        const double dense_built = static_cast<double>(BuiltBytes(dense));
        EXPECT_NEAR(static_cast<double>(pre.upload_bytes().preamble), pre_built, 0.005 * pre_built);
        EXPECT_NEAR(static_cast<double>(dense.upload_bytes().dense), dense_built,
                    0.005 * dense_built);
      }
    }
  }
}

// 32-bit values where the round's sum fits (every share half as long), 64
// where it does not; an explicit 32 that cannot hold the sum is refused.
TEST(EncodingChoiceTest, ValuesAreThirtyTwoBitsWhereTheSumFits) {
  SecureSumConfig c = Config(3000, 1, true, EncodingChoice::kDense);
  c.max_reports = 1000;  // C = 2, f = 16: 1000 x 131,073 + noise < 2^31
  c.noise_multiplier = 1.0;
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum narrow, SecureSum::Create(c));
  EXPECT_EQ(narrow.config().value_bits, 32u);
  c.value_bits = 64;
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum wide, SecureSum::Create(c));
  // The leader's D values at 4 instead of 8 bytes (the proof is the same).
  EXPECT_EQ(wide.upload_bytes().dense - narrow.upload_bytes().dense, 4u * 3000 + 1);
  c.value_bits = 0;
  c.max_reports = 40000;  // 40,000 x 131,073 > 2^31
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum many, SecureSum::Create(c));
  EXPECT_EQ(many.config().value_bits, 64u);
  c.value_bits = 32;
  EXPECT_THAT(SecureSum::Create(c).status().message(), ::testing::HasSubstr("cannot hold"));
  // The noise counts too: 1,000 reports fit, a multiplier of 1,000 does not.
  c.max_reports = 1000;
  c.noise_multiplier = 1000;
  EXPECT_FALSE(SecureSum::Create(c).ok());
  c.value_bits = 16;
  EXPECT_THAT(SecureSum::Create(c).status().message(), ::testing::HasSubstr("32 or 64"));
}

TEST(EncodingChoiceTest, AutoPicksTheSmallerUpload) {
  for (bool proofs : {false, true}) {
    for (uint32_t d : {0u, 1u, 2u, 4u}) {
      TANDEM_ASSERT_OK_AND_ASSIGN(
          SecureSum sum, SecureSum::Create(Config(5000, d, proofs, EncodingChoice::kAuto)));
      const auto& b = sum.upload_bytes();
      EXPECT_EQ(sum.encoding() == proto::REPORT_ENCODING_DENSE, b.dense < b.preamble)
          << "proofs=" << proofs << " d=" << d << " preamble " << b.preamble << " dense "
          << b.dense;
    }
  }
  // Sending every block (d = 0) PREAMBLE carries each value twice: dense wins.
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum all,
                              SecureSum::Create(Config(5000, 0, false, EncodingChoice::kAuto)));
  EXPECT_EQ(all.encoding(), proto::REPORT_ENCODING_DENSE);
  // One block in 16: PREAMBLE wins.
  TANDEM_ASSERT_OK_AND_ASSIGN(SecureSum sparse,
                              SecureSum::Create(Config(5000, 4, true, EncodingChoice::kAuto)));
  EXPECT_EQ(sparse.encoding(), proto::REPORT_ENCODING_PREAMBLE);
}

TEST(EncodingChoiceTest, DenseProofsNeedAtMostTwoToTheTwentyValues) {
  EXPECT_FALSE(
      SecureSum::Create(Config((uint64_t{1} << 20) + 1, 1, true, EncodingChoice::kDense)).ok());
  TANDEM_ASSERT_OK_AND_ASSIGN(
      SecureSum sum,
      SecureSum::Create(Config((uint64_t{1} << 20) + 1, 5, true, EncodingChoice::kAuto)));
  EXPECT_EQ(sum.encoding(), proto::REPORT_ENCODING_PREAMBLE);  // dense impossible
  EXPECT_EQ(sum.upload_bytes().dense, 0u);
  // Without proofs, every block sent: dense is smaller, but above the
  // aggregators' default sent-value cap auto keeps PREAMBLE's sampling.
  TANDEM_ASSERT_OK_AND_ASSIGN(
      SecureSum big,
      SecureSum::Create(Config(server::kAutoDenseMaxValues + 1, 1, false, EncodingChoice::kAuto)));
  EXPECT_LT(big.upload_bytes().dense, big.upload_bytes().preamble);
  EXPECT_EQ(big.encoding(), proto::REPORT_ENCODING_PREAMBLE);
  EXPECT_THAT(server::EncodingChoiceFromName("sparse").status().message(),
              ::testing::HasSubstr("auto, preamble or dense"));
}

}  // namespace
}  // namespace tandem::sim
