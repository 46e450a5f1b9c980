#include "server/core/upload_cap.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "server/core/upload_baselines.h"

namespace tandem::server {

absl::StatusOr<UploadVsDense> RoundUploadVsDense(const SecureSumConfig& config) {
  TANDEM_ASSIGN_OR_RETURN(const SecureSum sum, SecureSum::Create(config));
  const UploadBytes& b = sum.upload_bytes();
  return UploadVsDense{
      .bytes = sum.encoding() == proto::REPORT_ENCODING_DENSE ? b.dense : b.preamble,
      .dense_baseline = DenseSharingBytes(config.model_dimension, sum.config().value_bits),
      .value_bits = sum.config().value_bits};
}

absl::StatusOr<uint32_t> LogBlocksForUploadCap(SecureSumConfig config, double max_ratio) {
  if (!(max_ratio > 0) || !std::isfinite(max_ratio)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the upload cap must be a finite multiple > 0 of dense sharing, got ", max_ratio));
  }
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t d = 0; d <= 24; ++d) {
    config.log_blocks_per_group = d;
    // More groups than a round may have at this d: a larger d has fewer.
    const uint64_t group_dim = (uint64_t{1} << d) * std::max<uint64_t>(1, config.block_size);
    if ((config.model_dimension + group_dim - 1) / group_dim > kMaxGroups) continue;
    TANDEM_ASSIGN_OR_RETURN(const UploadVsDense u, RoundUploadVsDense(config));
    if (u.ratio() <= max_ratio) return d;
    best = std::min(best, u.ratio());
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "no PREAMBLE d uploads at most %g x dense sharing here (the least is %.3f x); raise the "
      "cap, the block size's ratio to the model, or drop the norm proofs",
      max_ratio, best));
}

absl::Status CheckUploadCap(const SecureSumConfig& config, double max_ratio) {
  TANDEM_ASSIGN_OR_RETURN(const UploadVsDense u, RoundUploadVsDense(config));
  if (u.ratio() <= max_ratio) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "rounds at d = %u, %u-bit values, noise multiplier %g upload %.3f x dense sharing, above "
      "the cap %g",
      config.log_blocks_per_group, u.value_bits, config.noise_multiplier, u.ratio(), max_ratio));
}

}  // namespace tandem::server
