// What the aggregator checks of a round's parameters before it opens the
// round, and the round's codec built from them (task.h: CodecForRound,
// DpfForRound, ProofForRound). Pure functions; thread-safe.
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregator/core/task.h"
#include "base/ids.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

constexpr int64_t kMaxRoundId = int64_t{1} << 62;

// The checks of RoundParameters that hold for every encoding.
absl::Status CheckRoundLimits(const proto::RoundParameters& p, const AggregatorOptions& options) {
  TANDEM_RETURN_IF_ERROR(ValidateId(p.task_id(), "task_id"));
  if (p.round_id() == 0 || p.round_id() > static_cast<uint64_t>(kMaxRoundId)) {
    return absl::InvalidArgumentError("round_id must be in [1, 2^62]");
  }
  if (p.dimension() == 0 || p.dimension() > options.max_dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be in [1, ", options.max_dimension, "]"));
  }
  if (p.max_reports() > options.max_reports_per_round) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_reports above this server's limit ", options.max_reports_per_round));
  }
  const double v = p.noise_variance();
  if (!std::isfinite(v) || (v != 0 && v < 1)) {
    return absl::InvalidArgumentError("noise_variance must be 0 (off) or a finite value >= 1");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<crypto::SparseDpf> DpfForRound(const proto::RoundParameters& p,
                                              const AggregatorOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckRoundLimits(p, options));
  if (p.encoding() != proto::REPORT_ENCODING_PREAMBLE) {
    return absl::InvalidArgumentError("not a PREAMBLE round");
  }
  const proto::BlockDpfParameters& g = p.group_parameters();
  if (g.log_num_blocks() > 24 || g.block_size() == 0 || p.num_groups() == 0) {
    return absl::InvalidArgumentError("group parameters out of range");
  }
  const uint64_t expected =
      uint64_t{p.num_groups()} * (uint64_t{1} << g.log_num_blocks()) * g.block_size();
  if (expected != p.dimension()) {
    return absl::InvalidArgumentError(
        "dimension must equal num_groups * 2^log_num_blocks * block_size");
  }
  return crypto::SparseDpf::Create(p.dimension(), static_cast<int>(g.block_size()),
                                   static_cast<int>(p.num_groups()),
                                   static_cast<int>(g.value_bits()));
}

absl::StatusOr<std::shared_ptr<const crypto::proof::NormProofSystem>> ProofForRound(
    const proto::RoundParameters& p) {
  if (!p.has_norm_bound()) return std::shared_ptr<const crypto::proof::NormProofSystem>();
  TANDEM_ASSIGN_OR_RETURN(
      crypto::proof::NormProofSystem system,
      crypto::proof::NormProofSystem::Create(p.group_parameters(), p.num_groups(), p.norm_bound()));
  return std::make_shared<const crypto::proof::NormProofSystem>(std::move(system));
}

absl::StatusOr<std::shared_ptr<const RoundCodec>> CodecForRound(const proto::RoundParameters& p,
                                                                const AggregatorOptions& options) {
  const int party = static_cast<int>(options.role);
  if (p.encoding() == proto::REPORT_ENCODING_DENSE) {
    TANDEM_RETURN_IF_ERROR(CheckRoundLimits(p, options));
    return RoundCodec::Dense(p, party);
  }
  if (p.encoding() != proto::REPORT_ENCODING_PREAMBLE) {
    return absl::InvalidArgumentError(absl::StrCat("unknown report encoding ", p.encoding()));
  }
  TANDEM_ASSIGN_OR_RETURN(crypto::SparseDpf dpf, DpfForRound(p, options));
  TANDEM_ASSIGN_OR_RETURN(auto proof, ProofForRound(p));
  return RoundCodec::Preamble(std::move(dpf), std::move(proof), party);
}

}  // namespace tandem::aggregator
