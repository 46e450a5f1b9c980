// Test-only: the secure sum of the main job's private rounds
// (deploy/run-main.sh part 2), shared by the server/core tests that plan
// bytes and noise for it (upload_cap_test.cc, task_targets_test.cc).
#ifndef TANDEM_SERVER_CORE_TESTING_MAIN_JOB_CONFIG_H_
#define TANDEM_SERVER_CORE_TESTING_MAIN_JOB_CONFIG_H_

#include <cstdint>

#include "server/core/secure_sum.h"

namespace tandem::server {

// The MLP 784-32-10's parameters.
inline constexpr uint64_t kMainJobDimension = 25450;

// Blocks of 256, clip 1, z = 1, 2,000 reports at most, `auto`, norm proofs
// when `proofs`; d is SecureSumConfig's default (1) unless a test sets it.
inline SecureSumConfig MainJobSecureSum(bool proofs) {
  SecureSumConfig c;
  c.task_id = "t";
  c.model_dimension = kMainJobDimension;
  c.block_size = 256;
  c.clip_l2_norm = 1.0;
  c.noise_multiplier = 1.0;
  c.max_reports = 2000;
  c.norm_proofs = proofs;
  c.encoding = EncodingChoice::kAuto;
  return c;
}

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_TESTING_MAIN_JOB_CONFIG_H_
