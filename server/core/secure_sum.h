// The coordinator's side of a private aggregation round over the two
// non-colluding aggregators (PREAMBLE): choose the round's parameters, open
// the round on both, and at the end add the two released shares, decode the
// fixed-point sum and turn it into the mean update.
//
// Unbiasing [I, see client/internal/report_builder.h]: each client sends one
// of the blocks_per_group blocks of every group, unscaled; the coordinator
// multiplies the decoded sum by blocks_per_group (= Delta/k), which is
// post-processing of the DP release. With block_selection TOP_NORM each
// client sends the largest block of every group and keeps the rest as its
// error-feedback residual (client/internal/block_selection.h): the sum is
// used as decoded, scale 1.
//
// Encoding per round [I, issue "the cost of privacy"]: PREAMBLE's keys carry
// each sent value twice (both servers get the public value corrections), so
// once a client sends about half of the vector a dense additive sharing
// (crypto/dense/dense_sharing.h: the leader's values plus a helper seed)
// uploads fewer bytes. With EncodingChoice::kAuto, Create() computes both
// uploads exactly for this round's D, B, k and proof (UploadBytes) and
// opens the round with the smaller; a dense round has no padding, no block
// sampling and scale 1. Either way a report's L2 sensitivity is the clip
// bound C, and the noise is calibrated to it; a PREAMBLE round with RANDOM
// block selection is also amplified by the block sampling, which the
// coordinator's accountant credits (crypto/dp/block_sampling.h).
#ifndef TANDEM_SERVER_CORE_SECURE_SUM_H_
#define TANDEM_SERVER_CORE_SECURE_SUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "crypto/fixed_point/fixed_point.h"
#include "proto/aggregator.pb.h"
#include "server/core/aggregator_client.h"
#include "server/core/clock_skew.h"

namespace tandem::server {

// kAuto considers a dense round only up to this many values: an aggregator's
// default policy refuses reports of more (aggregator/core/policy.h
// max_sent_values, which also sizes its upload listener), while PREAMBLE
// sends only the sampled blocks. kDense is not limited here: the
// aggregators' own policies decide.
inline constexpr uint64_t kAutoDenseMaxValues = uint64_t{1} << 18;

enum class EncodingChoice {
  kPreamble,  // always PREAMBLE's block-sparse keys
  kDense,     // always dense additive shares
  kAuto,      // the one with the smaller upload for the round
};

// The most groups (PREAMBLE's k) a round may have (SparseKeySet's bound).
inline constexpr uint64_t kMaxGroups = 4096;

struct SecureSumConfig {
  std::string task_id;
  uint64_t model_dimension = 0;  // length of the update vector
  uint32_t block_size = 64;      // B
  // d: each group has 2^d blocks and a client sends one of them, so the
  // upload is about 1/2^d of the vector. The number of groups k is the
  // smallest that covers model_dimension: k = ceil(dim / (2^d * B)).
  uint32_t log_blocks_per_group = 1;
  int frac_bits = 16;
  double clip_l2_norm = 1.0;  // C
  // Discrete Gaussian noise per aggregator, sigma = noise_multiplier * Delta
  // with Delta the report's L2 sensitivity as the aggregators check it:
  // sqrt(norm_bound.max_l2_squared) in norm-proof rounds, C * 2^frac_bits
  // otherwise (RoundParameters.noise_variance = sigma^2; each server reads
  // back exactly this multiplier, aggregator/core/policy.h). Each server adds
  // its own (DAP convention). 0 = off, which the aggregators' default policy
  // refuses. These library defaults are the bare protocol's; the
  // coordinator's own defaults are the private ones (CoordinatorOptions:
  // noise multiplier 1.0, min batch 10, norm proofs on).
  double noise_multiplier = 0.0;
  uint32_t max_reports = 1000;  // per round; also the fixed-point headroom
  // Width w of the shared values (Z_(2^w)): 32 or 64, or 0 for the narrower
  // one in which the round's decoded sum cannot wrap (ValueBitsFor below).
  // 32 halves every share a client sends, in either encoding. Create
  // resolves 0, so config().value_bits is always the width the rounds use.
  uint32_t value_bits = 0;
  // RoundParameters.dp.min_batch_size: Finalize is refused with fewer
  // accepted reports (the aggregators also refuse a round asking for less
  // than their policy's minimum).
  uint32_t min_batch_size = 1;
  // Malicious-client defence: every report carries a zero-knowledge proof
  // that each sent block and the whole report are within the clipping
  // bound (crypto/proof/norm_proof.h); both aggregators check it jointly.
  bool norm_proofs = false;
  // Announced in RoundParameters.block_selection; decides Finalize's scale.
  proto::BlockSelection block_selection = proto::BLOCK_SELECTION_RANDOM;
  // Which report encoding the rounds use (the coordinator's default is
  // kAuto; the library's is PREAMBLE, the paper's protocol).
  EncodingChoice encoding = EncodingChoice::kPreamble;
};

// Bytes one client uploads for one report (both servers' shares and proof
// shares, protobuf framing included; the ticket and signatures, the same
// for either encoding, are not), as crypto produces them.
struct UploadBytes {
  uint64_t preamble = 0;
  uint64_t dense = 0;  // 0 when a dense round is impossible (proofs and D > 2^20)
};

// "auto", "preamble" or "dense" (flags and TaskSpec.encoding.encoding);
// INVALID_ARGUMENT for another name.
absl::StatusOr<EncodingChoice> EncodingChoiceFromName(absl::string_view name);
absl::string_view EncodingChoiceName(EncodingChoice choice);
// "preamble" or "dense": the name of a round's encoding in summaries.
absl::string_view ReportEncodingName(proto::ReportEncoding encoding);

// The value width of `config`: config.value_bits when it is 32 or 64 and
// the sum fits, 32 for 0 when it fits in 32 bits, else 64. The sum fits in
// w bits when max_reports coordinates of at most C 2^f + 1 (a clipped
// report, fixed-point rounding included) plus both aggregators' noise
// within 20 of its standard deviations stay below 2^(w-1). INVALID_ARGUMENT
// for another width, or for 32 when the sum does not fit (the message says
// by how much).
absl::StatusOr<uint32_t> ValueBitsFor(const SecureSumConfig& config);

// The upload of one report in the PREAMBLE round `preamble` and in a dense
// round of the same task over `model_dimension` values. INVALID_ARGUMENT for
// bounds crypto rejects.
absl::StatusOr<UploadBytes> ComputeUploadBytes(const proto::RoundParameters& preamble,
                                               uint64_t model_dimension);

struct DecodedAggregate {
  uint64_t reports = 0;     // accepted by both servers
  std::vector<float> sum;   // unbiased estimate of the sum of clipped updates
  std::vector<float> mean;  // sum / reports
};

class SecureSum {
 public:
  // INVALID_ARGUMENT for inconsistent sizes. The padded dimension D is the
  // smallest k * 2^d * B >= model_dimension (padding < 2^d * B).
  static absl::StatusOr<SecureSum> Create(const SecureSumConfig& config);

  // Parameters of round `round_id` (the ones clients receive with their task).
  proto::RoundParameters RoundParameters(uint64_t round_id, int64_t deadline_unix_ms = 0) const;
  // Opens the round on both aggregators; each one's answer is a reading of
  // its clock for `skew` when not null.
  absl::Status Open(AggregatorClient& leader, AggregatorClient& helper, uint64_t round_id,
                    int64_t deadline_unix_ms = 0, ClockSkewMonitor* skew = nullptr) const;
  // Finalizes on the leader first (it drives the last verification pass),
  // then on the helper; checks both counted the same reports; decodes.
  absl::StatusOr<DecodedAggregate> Finalize(AggregatorClient& leader, AggregatorClient& helper,
                                            uint64_t round_id) const;

  // D of the round's vector: PREAMBLE's padded k * 2^d * B, or the model
  // dimension itself in a dense round.
  uint64_t padded_dimension() const { return dimension_; }
  proto::ReportEncoding encoding() const { return encoding_; }
  const UploadBytes& upload_bytes() const { return upload_bytes_; }
  uint32_t num_groups() const { return num_groups_; }
  uint32_t log_num_blocks() const { return log_num_blocks_; }
  uint64_t blocks_per_group() const { return uint64_t{1} << log_num_blocks_; }
  // Blocks per group among which each client picks one at random: the
  // block sampling the accountant credits (crypto/dp/block_sampling.h).
  // 1 for dense rounds (every value sent) and for TOP_NORM (blocks chosen
  // from the data).
  int64_t sampled_blocks_per_group() const {
    return encoding_ == proto::REPORT_ENCODING_PREAMBLE &&
                   config_.block_selection == proto::BLOCK_SELECTION_RANDOM
               ? static_cast<int64_t>(blocks_per_group())
               : 1;
  }
  const SecureSumConfig& config() const { return config_; }
  const crypto::FixedPointCodec& codec() const { return codec_; }

 private:
  SecureSum(SecureSumConfig config, uint64_t dimension, uint32_t num_groups,
            uint32_t log_num_blocks, crypto::FixedPointCodec codec)
      : config_(std::move(config)),
        dimension_(dimension),
        num_groups_(num_groups),
        log_num_blocks_(log_num_blocks),
        codec_(std::move(codec)) {}
  // Scale of the decoded sum: 2^d for RANDOM PREAMBLE rounds, else 1.
  double Scale() const;
  SecureSumConfig config_;
  proto::ReportEncoding encoding_ = proto::REPORT_ENCODING_PREAMBLE;
  UploadBytes upload_bytes_;
  uint64_t dimension_;
  uint32_t num_groups_;
  uint32_t log_num_blocks_;
  crypto::FixedPointCodec codec_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_SECURE_SUM_H_
