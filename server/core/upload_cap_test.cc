#include "server/core/upload_cap.h"

#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/testing/main_job_config.h"
#include "server/core/upload_baselines.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

double RatioAt(SecureSumConfig c, uint32_t d) {
  c.log_blocks_per_group = d;
  absl::StatusOr<UploadVsDense> u = RoundUploadVsDense(c);
  EXPECT_TRUE(u.ok()) << u.status();
  return u.ok() ? u->ratio() : 0;
}

// The d picked is the smallest that meets the cap: every smaller d uploads
// more than the cap allows; a larger cap never picks a larger d.
TEST(LogBlocksForUploadCap, PicksTheSmallestDWithinTheCap) {
  const SecureSumConfig c = MainJobSecureSum(/*proofs=*/true);
  uint32_t previous = 24;
  for (double cap : {0.5, 0.7, 1.0, 1.3, 2.0, 2.5, 4.0}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t d, LogBlocksForUploadCap(c, cap));
    EXPECT_LE(RatioAt(c, d), cap) << cap;
    for (uint32_t smaller = 0; smaller < d; ++smaller) {
      EXPECT_GT(RatioAt(c, smaller), cap) << cap << " d " << smaller;
    }
    EXPECT_LE(d, previous) << cap;
    previous = d;
  }
  // With proofs, only sampling brings a report under dense sharing's bytes.
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t d, LogBlocksForUploadCap(c, 1.0));
  EXPECT_GE(d, 2u);
}

// Without proofs `auto` takes dense shares at d = 0 when they fit: the
// dense report is the baseline plus framing.
TEST(LogBlocksForUploadCap, DenseSharesMeetACapJustAboveTheBaseline) {
  SecureSumConfig c = MainJobSecureSum(/*proofs=*/false);
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t d, LogBlocksForUploadCap(c, 1.01));
  EXPECT_EQ(d, 0u);
  c.log_blocks_per_group = d;
  TANDEM_ASSERT_OK_AND_ASSIGN(const UploadVsDense u, RoundUploadVsDense(c));
  EXPECT_EQ(u.dense_baseline, DenseSharingBytes(25450, 32));
  EXPECT_GE(u.bytes, u.dense_baseline);
}

// d values with more than 4096 groups are skipped, not refused.
TEST(LogBlocksForUploadCap, SkipsDWithTooManyGroups) {
  SecureSumConfig c = MainJobSecureSum(/*proofs=*/false);
  c.model_dimension = uint64_t{1} << 22;
  c.block_size = 64;
  c.encoding = EncodingChoice::kPreamble;
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t d, LogBlocksForUploadCap(c, 100));
  EXPECT_EQ(d, 4u);  // 2^22 / (2^4 64) = 4096 groups
}

TEST(LogBlocksForUploadCap, RefusesCapsNoDMeets) {
  const SecureSumConfig c = MainJobSecureSum(/*proofs=*/true);
  EXPECT_THAT(LogBlocksForUploadCap(c, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LogBlocksForUploadCap(c, std::nan("")), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LogBlocksForUploadCap(c, 1e-3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the least is")));
}

}  // namespace
}  // namespace tandem::server
