#include "server/core/task_targets.h"

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/noise_calibration.h"
#include "server/core/testing/main_job_config.h"
#include "server/core/upload_cap.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kDim = kMainJobDimension;

// The main job's private task: its secure sum at d = 1 with norm proofs,
// q = 0.05.
FederatedTaskOptions Task() {
  FederatedTaskOptions o;
  o.secure_sum = MainJobSecureSum(/*proofs=*/true);
  o.secure_sum.log_blocks_per_group = 1;
  o.sample_rate = 0.05;
  return o;
}

// The cap sets d first, and the noise is calibrated for that d's sampling:
// the same z as calibrating a task that had that d from the start.
TEST(ApplyTaskTargets, CapSetsDThenTheNoiseIsCalibratedForIt) {
  FederatedTaskOptions o = Task();
  const TaskTargets t{.max_upload_vs_dense = 1.0, .target_epsilon = 2.55, .rounds = 20};
  ASSERT_TRUE(ApplyTaskTargets(t, kDim, &o).ok());
  SecureSumConfig at = Task().secure_sum;
  at.model_dimension = kDim;
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t d, LogBlocksForUploadCap(at, 1.0));
  EXPECT_EQ(o.secure_sum.log_blocks_per_group, d);
  FederatedTaskOptions fixed = Task();
  fixed.secure_sum.log_blocks_per_group = d;
  ASSERT_TRUE(ApplyNoiseTarget({.target_epsilon = 2.55, .rounds = 20}, kDim, &fixed).ok());
  EXPECT_EQ(o.secure_sum.noise_multiplier, fixed.secure_sum.noise_multiplier);
  EXPECT_EQ(o.epsilon_budget, 2.55);
  // Without targets nothing changes.
  FederatedTaskOptions untouched = Task();
  ASSERT_TRUE(ApplyTaskTargets({}, kDim, &untouched).ok());
  EXPECT_EQ(untouched.secure_sum.log_blocks_per_group, 1u);
  EXPECT_EQ(untouched.secure_sum.noise_multiplier, 1.0);
}

// At z = 1 this task's sum needs 64-bit values and d = 2 meets the cap;
// the calibrated noise (block sampling buys less) fits 32 bits, where the
// proof's fixed elements make d = 2's reports larger than the cap: d is
// taken again at that noise, and the noise again for it.
TEST(ApplyTaskTargets, TakesDAgainWhenTheCalibratedNoiseNarrowsTheValues) {
  FederatedTaskOptions o = Task();
  o.secure_sum.max_reports = 32740;  // 32740 (2^16 + 1) + 20 sqrt(2) z Delta: 2^31 at z ~ 0.97
  SecureSumConfig at = o.secure_sum;
  at.model_dimension = kDim;
  TANDEM_ASSERT_OK_AND_ASSIGN(const UploadVsDense wide, RoundUploadVsDense(at));
  ASSERT_EQ(wide.value_bits, 64u);
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t first, LogBlocksForUploadCap(at, 1.0));
  // The cap sets d = first, then no noise reaches the epsilon: nothing
  // changes, d included.
  ASSERT_NE(first, o.secure_sum.log_blocks_per_group);
  FederatedTaskOptions refused = o;
  EXPECT_THAT(ApplyTaskTargets({.max_upload_vs_dense = 1.0, .target_epsilon = 1e-9, .rounds = 20},
                               kDim, &refused),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(refused.secure_sum.log_blocks_per_group, o.secure_sum.log_blocks_per_group);
  EXPECT_EQ(refused.secure_sum.noise_multiplier, o.secure_sum.noise_multiplier);
  const TaskTargets t{.max_upload_vs_dense = 1.0, .target_epsilon = 2.55, .rounds = 20};
  ASSERT_TRUE(ApplyTaskTargets(t, kDim, &o).ok());
  const uint32_t d = o.secure_sum.log_blocks_per_group;
  EXPECT_GT(d, first);
  at = o.secure_sum;
  at.model_dimension = kDim;
  TANDEM_ASSERT_OK_AND_ASSIGN(const UploadVsDense narrow, RoundUploadVsDense(at));
  EXPECT_EQ(narrow.value_bits, 32u);
  EXPECT_LE(narrow.ratio(), 1.0);
  // The least d at the final noise, calibrated for it.
  TANDEM_ASSERT_OK_AND_ASSIGN(const uint32_t least, LogBlocksForUploadCap(at, 1.0));
  EXPECT_EQ(least, d);
  FederatedTaskOptions fixed = Task();
  fixed.secure_sum.max_reports = 32740;
  fixed.secure_sum.log_blocks_per_group = d;
  ASSERT_TRUE(ApplyNoiseTarget({.target_epsilon = 2.55, .rounds = 20}, kDim, &fixed).ok());
  EXPECT_EQ(o.secure_sum.noise_multiplier, fixed.secure_sum.noise_multiplier);
}

}  // namespace
}  // namespace tandem::server
