#include "client/internal/report_builder.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::client {

ReportParameters ReportParametersFromRound(const proto::RoundParameters& round) {
  ReportParameters p;
  p.dimension = round.dimension();
  p.block_size = round.group_parameters().block_size();
  p.num_groups = round.num_groups();
  p.log_num_blocks = round.group_parameters().log_num_blocks();
  p.frac_bits = static_cast<int>(round.fixed_point().fractional_bits());
  p.clip_l2_norm = round.fixed_point().clip_l2_norm();
  p.max_summands = std::max<uint64_t>(1, round.max_reports());
  if (round.has_norm_bound()) p.norm_bound = round.norm_bound();
  p.block_selection = round.block_selection();
  p.encoding = round.encoding();
  if (round.group_parameters().value_bits() != 0) {
    p.value_bits = static_cast<int>(round.group_parameters().value_bits());
  }
  return p;
}

absl::StatusOr<ReportBuilder> ReportBuilder::Create(const ReportParameters& p) {
  if (p.dimension == 0 || p.dimension > p.max_dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension ", p.dimension, " is outside [1, ", p.max_dimension, "]"));
  }
  if (p.encoding == proto::REPORT_ENCODING_DENSE) return CreateDense(p);
  if (p.encoding != proto::REPORT_ENCODING_PREAMBLE) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown report encoding ", static_cast<int>(p.encoding)));
  }
  if (p.num_groups == 0 || p.block_size == 0 || p.log_num_blocks > 24) {
    return absl::InvalidArgumentError(
        "num_groups and block_size must be >= 1 and log_num_blocks <= 24");
  }
  // Each factor is at most D (<= max_dimension), so no product below overflows
  // before it is compared with D.
  const uint64_t blocks = uint64_t{1} << p.log_num_blocks;
  if (p.num_groups > p.dimension || p.block_size > p.dimension ||
      uint64_t{p.num_groups} * p.block_size > p.dimension || blocks > p.dimension ||
      uint64_t{p.num_groups} * p.block_size * blocks != p.dimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension ", p.dimension, " must be num_groups * 2^log_num_blocks * block_size = ",
        p.num_groups, " * 2^", p.log_num_blocks, " * ", p.block_size));
  }
  TANDEM_ASSIGN_OR_RETURN(crypto::SparseDpf dpf,
                          crypto::SparseDpf::Create(p.dimension, static_cast<int>(p.block_size),
                                                    static_cast<int>(p.num_groups), p.value_bits));
  TANDEM_ASSIGN_OR_RETURN(
      crypto::FixedPointCodec codec,
      crypto::FixedPointCodec::Create(p.frac_bits, p.clip_l2_norm, p.max_summands, p.value_bits));
  if (p.block_selection != proto::BLOCK_SELECTION_RANDOM &&
      p.block_selection != proto::BLOCK_SELECTION_TOP_NORM) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown block selection ", static_cast<int>(p.block_selection)));
  }
  std::optional<crypto::proof::NormProofSystem> proof;
  if (p.norm_bound.has_value()) {
    proto::BlockDpfParameters group;
    group.set_log_num_blocks(p.log_num_blocks);
    group.set_block_size(p.block_size);
    group.set_value_bits(static_cast<uint32_t>(p.value_bits));
    TANDEM_ASSIGN_OR_RETURN(
        proof, crypto::proof::NormProofSystem::Create(group, p.num_groups, *p.norm_bound));
  }
  return ReportBuilder(std::move(dpf), std::move(codec), std::move(proof), p.block_selection);
}

absl::StatusOr<ReportBuilder> ReportBuilder::CreateDense(const ReportParameters& p) {
  TANDEM_ASSIGN_OR_RETURN(
      crypto::FixedPointCodec codec,
      crypto::FixedPointCodec::Create(p.frac_bits, p.clip_l2_norm, p.max_summands, p.value_bits));
  TANDEM_ASSIGN_OR_RETURN(crypto::DenseSharing sharing,
                          crypto::DenseSharing::Create(p.dimension, p.value_bits));
  ReportBuilder builder(std::nullopt, std::move(codec), std::nullopt, p.block_selection);
  builder.sharing_.emplace(std::move(sharing));
  if (p.norm_bound.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(builder.dense_proof_, crypto::proof::DenseNormProof::Create(
                                                      p.dimension, p.value_bits, *p.norm_bound));
  }
  return builder;
}

BlockGeometry ReportBuilder::geometry() const {
  if (dense()) {  // one group of one block: everything is sent
    return BlockGeometry{.num_groups = 1,
                         .blocks_per_group = 1,
                         .block_size = static_cast<uint32_t>(sharing_->dimension())};
  }
  return BlockGeometry{.num_groups = static_cast<uint32_t>(dpf_->num_groups()),
                       .blocks_per_group = dpf_->blocks_per_group(),
                       .block_size = static_cast<uint32_t>(dpf_->block_size())};
}

absl::StatusOr<std::vector<uint32_t>> ReportBuilder::SelectBlocks(absl::Span<const float> padded,
                                                                  SecureRandom* rng) const {
  if (selection_ == proto::BLOCK_SELECTION_TOP_NORM) {
    return SelectTopNormBlocks(padded, geometry());
  }
  const uint64_t blocks = dpf_->blocks_per_group();
  std::vector<uint32_t> indices(dpf_->num_groups());
  // Uniform block index by rejection (no modulo bias).
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % blocks);
  for (uint32_t& idx : indices) {
    while (true) {
      TANDEM_ASSIGN_OR_RETURN(uint64_t r, rng->NextUint64());
      if (r < limit) {
        idx = static_cast<uint32_t>(r % blocks);
        break;
      }
    }
  }
  return indices;
}

absl::StatusOr<BuiltReport> ReportBuilder::Build(absl::Span<const float> update,
                                                 SecureRandom* rng) const {
  return Build(update, rng, absl::string_view());
}

absl::StatusOr<BuiltReport> ReportBuilder::Build(absl::Span<const float> update, SecureRandom* rng,
                                                 absl::string_view report_id) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng is required");
  if (!report_id.empty() && report_id.size() != 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("report id must be 16 bytes, got ", report_id.size()));
  }
  const uint64_t dim = dense() ? sharing_->dimension() : dpf_->dimension();
  if (update.size() > dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("update has ", update.size(), " entries, the round's D is ", dim));
  }
  std::vector<float> padded(update.begin(), update.end());
  padded.resize(dim, 0.0f);
  for (size_t i = 0; i < update.size(); ++i) {
    if (!std::isfinite(update[i])) {
      return absl::InvalidArgumentError(absl::StrCat("update value ", i, " is NaN or infinity"));
    }
  }
  BuiltReport report;
  // The given id, or 16 random bytes (drawn after the keys, as always).
  auto assign_id = [&]() -> absl::Status {
    if (!report_id.empty()) {
      report.report_id = std::string(report_id);
      return absl::OkStatus();
    }
    report.report_id.assign(16, '\0');
    return rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(report.report_id.data()), 16));
  };
  if (dense()) {
    TANDEM_RETURN_IF_ERROR(assign_id());
    return BuildDense(padded, rng, std::move(report));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint32_t> indices, SelectBlocks(padded, rng));
  const int k = dpf_->num_groups();
  const int b = dpf_->block_size();
  auto block_start = [&](int g) {
    return static_cast<uint64_t>(g) * dpf_->group_dimension() + uint64_t{indices[g]} * b;
  };
  if (selection_ == proto::BLOCK_SELECTION_TOP_NORM) {
    // Clip what is sent: the selected blocks alone (norm <= C, as the norm
    // proof's bound requires), not the whole update.
    std::vector<float> sent(dim, 0.0f);
    for (int g = 0; g < k; ++g) {
      std::copy(padded.begin() + block_start(g), padded.begin() + block_start(g) + b,
                sent.begin() + block_start(g));
    }
    padded = std::move(sent);
  }
  std::vector<uint64_t> encoded(dim);
  TANDEM_ASSIGN_OR_RETURN(report.clip_factor, codec_.Encode(padded, absl::MakeSpan(encoded)));
  std::vector<uint64_t> values(static_cast<size_t>(k) * b);
  for (int g = 0; g < k; ++g) {
    std::copy(encoded.begin() + block_start(g), encoded.begin() + block_start(g) + b,
              values.begin() + static_cast<size_t>(g) * b);
  }
  TANDEM_ASSIGN_OR_RETURN(auto keys, dpf_->GenerateKeys(indices, values, rng));
  report.block_indices = indices;
  TANDEM_RETURN_IF_ERROR(assign_id());
  if (proof_.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(auto shares, proof_->Prove(report.report_id, keys.first, keys.second,
                                                       rng, &report.public_digest.emplace()));
    report.leader_proof = std::move(shares.first);
    report.helper_proof = std::move(shares.second);
  }
  report.leader_share = std::move(keys.first);
  report.helper_share = std::move(keys.second);
  report.upload_bytes = report.leader_share.ByteSizeLong() + report.helper_share.ByteSizeLong();
  if (proof_.has_value()) {
    report.upload_bytes +=
        report.leader_proof->ByteSizeLong() + report.helper_proof->ByteSizeLong();
  }
  return report;
}

absl::StatusOr<BuiltReport> ReportBuilder::BuildDense(absl::Span<const float> padded,
                                                      SecureRandom* rng, BuiltReport report) const {
  std::vector<uint64_t> encoded(padded.size());
  TANDEM_ASSIGN_OR_RETURN(report.clip_factor, codec_.Encode(padded, absl::MakeSpan(encoded)));
  TANDEM_ASSIGN_OR_RETURN(auto shares, sharing_->Share(encoded, rng));
  report.block_indices = {0};  // the one "block": everything is sent
  if (dense_proof_.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(
        auto proofs, dense_proof_->Prove(report.report_id, shares.first, shares.second, rng));
    report.leader_proof = std::move(proofs.first);
    report.helper_proof = std::move(proofs.second);
  }
  report.leader_dense = std::move(shares.first);
  report.helper_dense = std::move(shares.second);
  report.upload_bytes = report.leader_dense->ByteSizeLong() + report.helper_dense->ByteSizeLong();
  if (dense_proof_.has_value()) {
    report.upload_bytes +=
        report.leader_proof->ByteSizeLong() + report.helper_proof->ByteSizeLong();
  }
  return report;
}

absl::StatusOr<BuiltReport> BuildWithErrorFeedback(const ReportBuilder& builder,
                                                   absl::string_view task_id,
                                                   absl::Span<const float> update,
                                                   SecureRandom* rng, absl::string_view report_id,
                                                   ErrorFeedback* memory, StateStore* store) {
  // A dense round sends everything: no residual, and the memory is kept for
  // the next TOP_NORM round.
  if (memory == nullptr || builder.dense() ||
      builder.block_selection() != proto::BLOCK_SELECTION_TOP_NORM) {
    return builder.Build(update, rng, report_id);
  }
  ErrorFeedback loaded = *memory;
  TANDEM_RETURN_IF_ERROR(LoadErrorFeedback(store, &loaded));
  const std::vector<float> compensated = loaded.Compensate(task_id, update);
  TANDEM_ASSIGN_OR_RETURN(BuiltReport report, builder.Build(compensated, rng, report_id));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> residual,
                          UnsentResidual(compensated, report.block_indices, builder.geometry()));
  loaded.Keep(task_id, std::move(residual));
  TANDEM_RETURN_IF_ERROR(SaveErrorFeedback(store, loaded));
  *memory = std::move(loaded);
  return report;
}

UploadRequests MakeUploadRequests(BuiltReport report, const std::string& task_id,
                                  uint64_t round_id) {
  UploadRequests out;
  for (proto::UploadRequest* r : {&out.to_leader, &out.to_helper}) {
    r->set_task_id(task_id);
    r->set_round_id(round_id);
    r->set_report_id(report.report_id);
  }
  if (report.leader_dense.has_value()) {
    *out.to_leader.mutable_dense_share() = *std::move(report.leader_dense);
    *out.to_helper.mutable_dense_share() = *std::move(report.helper_dense);
  } else {
    *out.to_leader.mutable_key_share() = std::move(report.leader_share);
    *out.to_helper.mutable_key_share() = std::move(report.helper_share);
  }
  if (report.leader_proof.has_value()) {
    *out.to_leader.mutable_norm_proof() = *std::move(report.leader_proof);
  }
  if (report.helper_proof.has_value()) {
    *out.to_helper.mutable_norm_proof() = *std::move(report.helper_proof);
  }
  out.public_digest = report.public_digest;
  return out;
}

UploadRequests MakeUploadRequests(BuiltReport report, const std::string& task_id, uint64_t round_id,
                                  const proto::SignedUploadTicket& ticket) {
  UploadRequests out = MakeUploadRequests(std::move(report), task_id, round_id);
  *out.to_leader.mutable_ticket() = ticket;
  *out.to_helper.mutable_ticket() = ticket;
  return out;
}

}  // namespace tandem::client
