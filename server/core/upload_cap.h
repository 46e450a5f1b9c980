// PREAMBLE's d from the bytes a task allows (TaskSpec
// encoding.max_upload_vs_dense, tandem-coordinator and tandem-sim
// --max_upload_vs_dense): the smallest d whose report is at most a given
// multiple of the honest dense baseline (upload_baselines.h: D values at the
// round's width to the leader, a seed to the helper).
//
// Why the smallest: a client sends one of 2^d blocks per group and the
// coordinator scales the decoded sum by 2^d, so both the sampling variance,
// (2^d - 1) ||x||^2 per client, and the noise's scale grow with d; block
// sampling's amplification (crypto/dp/block_sampling.h) buys back part of
// the noise (noise_calibration.h), not all of it (docs/concepts/
// dp-accounting.md: at epsilon 2.55 the main job's accuracy falls from
// 0.67-0.70 at d = 1 to 0.62-0.64 at d = 2). The PREAMBLE paper's point is
// the bytes: k B << D is where it beats dense sharing. So the least
// sampling that meets the cap.
//
// Pure; thread-compatible.
#ifndef TANDEM_SERVER_CORE_UPLOAD_CAP_H_
#define TANDEM_SERVER_CORE_UPLOAD_CAP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/core/secure_sum.h"

namespace tandem::server {

// The bytes a report of `config`'s rounds uploads in the encoding they use
// (UploadBytes: shares and framing) against the honest dense baseline at
// their value width. SecureSum::Create's errors.
struct UploadVsDense {
  uint64_t bytes = 0;
  uint64_t dense_baseline = 0;
  uint32_t value_bits = 0;  // the rounds' width (32 or 64)
  double ratio() const {
    return dense_baseline == 0 ? 0.0 : static_cast<double>(bytes) / dense_baseline;
  }
};
absl::StatusOr<UploadVsDense> RoundUploadVsDense(const SecureSumConfig& config);

// The smallest d in [0, 24] whose rounds (config with that
// log_blocks_per_group; model_dimension set) upload at most `max_ratio`
// times the honest dense baseline; d values with more than 4096 groups are
// skipped. INVALID_ARGUMENT for a ratio that is not finite and > 0, and
// when no d meets it (the message gives the smallest ratio any d reaches).
absl::StatusOr<uint32_t> LogBlocksForUploadCap(SecureSumConfig config, double max_ratio);

// OK when `config`'s rounds upload at most `max_ratio` times the dense
// baseline; INVALID_ARGUMENT saying by how much they exceed it (after a
// noise calibration that widened the values, for instance).
absl::Status CheckUploadCap(const SecureSumConfig& config, double max_ratio);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_UPLOAD_CAP_H_
