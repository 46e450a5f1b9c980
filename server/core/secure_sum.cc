#include "server/core/secure_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/dense_norm_proof.h"
#include "crypto/proof/norm_proof.h"

namespace tandem::server {
namespace {

// Protobuf framing of a length-delimited field of n bytes (tag + length).
uint64_t Framed(uint64_t n) {
  uint64_t len = 1;
  for (uint64_t v = n; v >= 128; v >>= 7) ++len;
  return 1 + len + n;
}

// Both servers' proof shares (proto NormProofShare): the leader's witness
// and proof elements (8 bytes each, packed), blind and peer part; the
// helper's seed, blind and peer part.
uint64_t ProofShareBytes(const crypto::proof::NormCircuit& c) {
  const uint64_t leader =
      Framed(8 * c.witness_length()) + Framed(8 * c.flp().proof_length()) + Framed(16) + Framed(32);
  const uint64_t helper = Framed(16) + Framed(16) + Framed(32);
  return leader + helper;
}

}  // namespace

absl::StatusOr<EncodingChoice> EncodingChoiceFromName(absl::string_view name) {
  if (name == "auto") return EncodingChoice::kAuto;
  if (name == "preamble") return EncodingChoice::kPreamble;
  if (name == "dense") return EncodingChoice::kDense;
  return absl::InvalidArgumentError(
      absl::StrCat("encoding must be auto, preamble or dense, got '", name, "'"));
}

absl::string_view EncodingChoiceName(EncodingChoice choice) {
  switch (choice) {
    case EncodingChoice::kAuto:
      return "auto";
    case EncodingChoice::kDense:
      return "dense";
    case EncodingChoice::kPreamble:
      break;
  }
  return "preamble";
}

absl::string_view ReportEncodingName(proto::ReportEncoding encoding) {
  return encoding == proto::REPORT_ENCODING_DENSE ? "dense" : "preamble";
}

// The serialized sizes of what crypto builds (client/internal/
// report_builder.cc), checked against real reports in secure_sum_test.
absl::StatusOr<UploadBytes> ComputeUploadBytes(const proto::RoundParameters& preamble,
                                               uint64_t model_dimension) {
  UploadBytes out;
  const proto::BlockDpfParameters& g = preamble.group_parameters();
  // One BlockDpfKey: party (party 1 only: 2 bytes), seed, d correction
  // words, B packed value corrections, the 64-byte proof correction.
  const uint64_t corrections = uint64_t{g.block_size()} * g.value_bits() / 8;  // packed at 32
  const uint64_t key =
      Framed(16) + g.log_num_blocks() * Framed(Framed(16)) + Framed(corrections) + Framed(64);
  const uint64_t header = Framed(6) + 2;  // group_parameters and num_groups
  out.preamble = 2 * header + preamble.num_groups() * (Framed(key) + Framed(key + 2));
  if (preamble.has_norm_bound()) {
    TANDEM_ASSIGN_OR_RETURN(
        crypto::proof::NormProofSystem p,
        crypto::proof::NormProofSystem::Create(g, preamble.num_groups(), preamble.norm_bound()));
    out.preamble += ProofShareBytes(p.circuit());
  }
  // Dense: the leader's packed values; the helper's party (2 bytes) and seed.
  out.dense = Framed(model_dimension * g.value_bits() / 8) + 2 + Framed(16);
  if (preamble.has_norm_bound()) {
    proto::NormBoundParameters bound = preamble.norm_bound();
    bound.set_max_l2_squared(crypto::proof::L2SquaredBoundForClip(
        preamble.fixed_point().clip_l2_norm(),
        static_cast<int>(preamble.fixed_point().fractional_bits()), model_dimension));
    absl::StatusOr<crypto::proof::DenseNormProof> p = crypto::proof::DenseNormProof::Create(
        model_dimension, static_cast<int>(g.value_bits()), bound);
    out.dense = p.ok() ? out.dense + ProofShareBytes(p->circuit()) : 0;
  }
  return out;
}

absl::StatusOr<uint32_t> ValueBitsFor(const SecureSumConfig& config) {
  if (config.value_bits != 0 && config.value_bits != 32 && config.value_bits != 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("value_bits must be 0 (auto), 32 or 64, got ", config.value_bits));
  }
  if (config.value_bits == 64) return 64u;
  // PREAMBLE (and dense additive sharing) share values in Z_(2^w); the paper
  // fixes no w. The narrowest that cannot wrap halves the upload: the
  // decoded sum is max_reports coordinates of at most C 2^f + 1 plus two
  // servers' noise of sd sigma each (sd sqrt(2) sigma together), sigma =
  // z Delta with Delta <= C 2^f + sqrt(D) (the norm bound's rounding slack,
  // crypto/proof L2SquaredBoundForClip). Beyond 20 sd a Gaussian lies with
  // probability below 1e-88, per coordinate and round.
  const double unit = config.clip_l2_norm * std::ldexp(1.0, config.frac_bits);
  const double delta = unit + std::sqrt(static_cast<double>(config.model_dimension));
  const double need = static_cast<double>(config.max_reports) * (unit + 1.0) +
                      20.0 * std::sqrt(2.0) * config.noise_multiplier * delta;
  const double room = std::ldexp(1.0, 31);
  if (need < room) return 32u;
  if (config.value_bits == 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("value_bits 32 cannot hold this round's sum: max_reports ", config.max_reports,
                     " x (C 2^f + 1) plus the noise's tail needs ", need,
                     " < 2^31; lower max_reports, the clip "
                     "or frac_bits, or use 64"));
  }
  return 64u;
}

absl::StatusOr<SecureSum> SecureSum::Create(const SecureSumConfig& requested) {
  TANDEM_ASSIGN_OR_RETURN(const uint32_t value_bits, ValueBitsFor(requested));
  SecureSumConfig config = requested;
  config.value_bits = value_bits;
  if (config.model_dimension == 0 || config.block_size == 0 || config.log_blocks_per_group > 24) {
    return absl::InvalidArgumentError(
        "model_dimension and block_size must be > 0, log_blocks_per_group <= 24");
  }
  if (config.block_selection != proto::BLOCK_SELECTION_RANDOM &&
      config.block_selection != proto::BLOCK_SELECTION_TOP_NORM) {
    return absl::InvalidArgumentError("unknown block_selection");
  }
  if (config.noise_multiplier < 0 || !std::isfinite(config.noise_multiplier)) {
    return absl::InvalidArgumentError("noise_multiplier must be finite and >= 0");
  }
  const uint32_t d = config.log_blocks_per_group;
  const uint64_t group_dim = (uint64_t{1} << d) * config.block_size;
  const uint64_t k = (config.model_dimension + group_dim - 1) / group_dim;
  if (k > kMaxGroups) {
    return absl::InvalidArgumentError("more than 4096 groups: raise block_size or d");
  }
  TANDEM_ASSIGN_OR_RETURN(
      crypto::FixedPointCodec codec,
      crypto::FixedPointCodec::Create(config.frac_bits, config.clip_l2_norm, config.max_reports,
                                      static_cast<int>(value_bits)));
  SecureSum sum(config, k * group_dim, static_cast<uint32_t>(k), d, std::move(codec));
  TANDEM_ASSIGN_OR_RETURN(sum.upload_bytes_,
                          ComputeUploadBytes(sum.RoundParameters(1), config.model_dimension));
  const bool dense = config.encoding == EncodingChoice::kDense ||
                     (config.encoding == EncodingChoice::kAuto && sum.upload_bytes_.dense != 0 &&
                      config.model_dimension <= kAutoDenseMaxValues &&
                      sum.upload_bytes_.dense < sum.upload_bytes_.preamble);
  if (dense) {
    if (sum.upload_bytes_.dense == 0) {
      return absl::InvalidArgumentError(
          "a dense round with norm proofs takes at most 2^20 values; use PREAMBLE");
    }
    sum.encoding_ = proto::REPORT_ENCODING_DENSE;
    sum.dimension_ = config.model_dimension;
  }
  return sum;
}

double SecureSum::Scale() const {
  // Unbiased for one block of m picked at random; m = 1 where no block is
  // sampled (dense rounds, TOP_NORM).
  return static_cast<double>(sampled_blocks_per_group());
}

proto::RoundParameters SecureSum::RoundParameters(uint64_t round_id,
                                                  int64_t deadline_unix_ms) const {
  proto::RoundParameters p;
  p.set_task_id(config_.task_id);
  p.set_round_id(round_id);
  p.set_dimension(dimension_);
  p.mutable_group_parameters()->set_log_num_blocks(log_num_blocks_);
  p.mutable_group_parameters()->set_block_size(config_.block_size);
  p.mutable_group_parameters()->set_value_bits(config_.value_bits);
  p.set_num_groups(num_groups_);
  p.set_max_reports(config_.max_reports);
  p.set_deadline_unix_ms(deadline_unix_ms);
  p.mutable_dp()->set_min_batch_size(config_.min_batch_size);
  p.mutable_dp()->set_noise_multiplier(config_.noise_multiplier);
  p.mutable_fixed_point()->set_fractional_bits(static_cast<uint32_t>(config_.frac_bits));
  p.mutable_fixed_point()->set_clip_l2_norm(config_.clip_l2_norm);
  p.set_block_selection(config_.block_selection);
  p.set_encoding(encoding_);
  const bool dense = encoding_ == proto::REPORT_ENCODING_DENSE;
  if (dense) {  // the whole vector in one sharing: no groups
    p.clear_group_parameters();
    p.mutable_group_parameters()->set_value_bits(config_.value_bits);
    p.set_num_groups(0);
    p.set_block_selection(proto::BLOCK_SELECTION_RANDOM);
  }
  if (config_.norm_proofs) {
    // The bound of an encoded report of L2 norm <= C over the k * B values
    // a client sends (D in a dense round; fixed-point rounding included); a
    // block can be no larger than the report.
    const uint64_t bound = crypto::proof::L2SquaredBoundForClip(
        config_.clip_l2_norm, config_.frac_bits,
        dense ? dimension_ : static_cast<uint64_t>(num_groups_) * config_.block_size);
    p.mutable_norm_bound()->set_max_l2_squared(bound);
    p.mutable_norm_bound()->set_max_block_l2_squared(bound);
  }
  if (config_.noise_multiplier > 0) {
    // sigma in integer units of the fixed-point encoding, at least 1. The
    // aggregators read the multiplier back as sigma / Delta, with Delta the
    // L2 sensitivity they can check: sqrt(max_l2_squared) in norm-proof
    // rounds (slightly above C * 2^f: the bound includes the rounding), the
    // announced C * 2^f otherwise (aggregator/core/policy.h). sigma is
    // z * Delta, so that each server sees exactly z.
    const double delta =
        p.has_norm_bound()
            ? std::sqrt(static_cast<double>(p.norm_bound().max_l2_squared()))
            : p.fixed_point().clip_l2_norm() *
                  std::ldexp(1.0, static_cast<int>(p.fixed_point().fractional_bits()));
    const double sigma = config_.noise_multiplier * delta;
    double variance = std::max(1.0, sigma * sigma);
    // Rounding could leave sqrt(variance) / Delta one ulp off z: take the
    // smallest double near sigma^2 for which the servers' reading is >= z
    // (a server whose floor is z would refuse less), which reads exactly z
    // wherever such a double exists. (The coordinator's own accountant
    // charges z against C: the real sigma is no smaller, so its epsilon is
    // an upper bound.)
    const double z = config_.noise_multiplier;
    for (int i = 0; i < 64 && std::sqrt(variance) / delta < z; ++i) {
      variance = std::nextafter(variance, std::numeric_limits<double>::infinity());
    }
    for (int i = 0; i < 64; ++i) {
      const double lower = std::nextafter(variance, 0.0);
      if (lower < 1.0 || std::sqrt(lower) / delta < z) break;
      variance = lower;
    }
    p.set_noise_variance(variance);
  }
  return p;
}

absl::Status SecureSum::Open(AggregatorClient& leader, AggregatorClient& helper, uint64_t round_id,
                             int64_t deadline_unix_ms, ClockSkewMonitor* skew) const {
  const proto::RoundParameters p = RoundParameters(round_id, deadline_unix_ms);
  for (auto [role, aggregator] :
       {std::pair<const char*, AggregatorClient*>{"leader", &leader}, {"helper", &helper}}) {
    const absl::Time sent = skew != nullptr ? skew->Now() : absl::InfinitePast();
    TANDEM_ASSIGN_OR_RETURN(const proto::OpenRoundResponse opened, aggregator->OpenRound(p));
    if (skew != nullptr) skew->Observe(role, sent, skew->Now(), opened);
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodedAggregate> SecureSum::Finalize(AggregatorClient& leader,
                                                     AggregatorClient& helper,
                                                     uint64_t round_id) const {
  proto::FinalizeRequest req;
  req.set_task_id(config_.task_id);
  req.set_round_id(round_id);
  TANDEM_ASSIGN_OR_RETURN(proto::FinalizeResponse a, leader.Finalize(req));
  TANDEM_ASSIGN_OR_RETURN(proto::FinalizeResponse b, helper.Finalize(req));
  if (a.accepted_reports() != b.accepted_reports()) {
    return absl::DataLossError(absl::StrCat("aggregators disagree: ", a.accepted_reports(), " vs ",
                                            b.accepted_reports(), " reports"));
  }
  for (const proto::FinalizeResponse* r : {&a, &b}) {
    const proto::Tensor& t = r->aggregate_share();
    if (t.dtype() != proto::DTYPE_UINT64 || t.shape_size() != 1 ||
        static_cast<uint64_t>(t.shape(0)) != dimension_ || t.data().size() != dimension_ * 8) {
      return absl::InvalidArgumentError("aggregate share has the wrong shape or type");
    }
  }
  std::vector<uint64_t> sa(dimension_), sb(dimension_);
  std::memcpy(sa.data(), a.aggregate_share().data().data(), dimension_ * 8);
  std::memcpy(sb.data(), b.aggregate_share().data().data(), dimension_ * 8);
  for (uint64_t i = 0; i < dimension_; ++i) sa[i] += sb[i];
  std::vector<double> decoded(dimension_);
  TANDEM_RETURN_IF_ERROR(codec_.Decode(sa, absl::MakeSpan(decoded)));
  DecodedAggregate out;
  out.reports = a.accepted_reports();
  out.sum.resize(config_.model_dimension);
  out.mean.resize(config_.model_dimension);
  const double scale = Scale();
  for (uint64_t i = 0; i < config_.model_dimension; ++i) {
    out.sum[i] = static_cast<float>(decoded[i] * scale);
    out.mean[i] = out.reports == 0 ? 0.f : static_cast<float>(decoded[i] * scale / out.reports);
  }
  return out;
}

}  // namespace tandem::server
