// ReportEncoder (client/include/tandem/client/report_encoder.h) over the
// internal ReportBuilder.
#include "tandem/client/report_encoder.h"

#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/assignment_checks.h"
#include "client/internal/report_builder.h"
#include "proto/aggregator.pb.h"

namespace tandem::client {
namespace {

// A signed ticket is ~130 bytes; anything near this is not one.
constexpr size_t kMaxTicketBytes = 64 << 10;
// RoundParameters are a few hundred bytes.
constexpr size_t kMaxRoundParametersBytes = 64 << 10;

class ReportEncoderImpl : public ReportEncoder {
 public:
  ReportEncoderImpl(RoundSpec spec, ReportBuilder builder, SecureRandom* random)
      : spec_(std::move(spec)), builder_(std::move(builder)), random_(random) {}

  absl::StatusOr<EncodedReport> Encode(absl::Span<const float> update) const override {
    TANDEM_ASSIGN_OR_RETURN(BuiltReport built, builder_.Build(update, random_));
    return Serialize(update, std::move(built), nullptr);
  }

  absl::StatusOr<EncodedReport> EncodeWithTicket(absl::Span<const float> update,
                                                 absl::string_view signed_ticket) const override {
    proto::SignedUploadTicket ticket;
    if (signed_ticket.size() > kMaxTicketBytes ||
        !ticket.ParseFromArray(signed_ticket.data(), static_cast<int>(signed_ticket.size()))) {
      return absl::InvalidArgumentError("the signed upload ticket is too large or does not parse");
    }
    TANDEM_ASSIGN_OR_RETURN(proto::UploadTicket t,
                            ParseUploadTicketFor(ticket, spec_.task_id, spec_.round_id));
    TANDEM_ASSIGN_OR_RETURN(BuiltReport built, builder_.Build(update, random_, t.ticket_id()));
    return Serialize(update, std::move(built), &ticket);
  }

 private:
  absl::StatusOr<EncodedReport> Serialize(absl::Span<const float> update, BuiltReport built,
                                          const proto::SignedUploadTicket* ticket) const {
    EncodedReport out;
    if (builder_.block_selection() == proto::BLOCK_SELECTION_TOP_NORM) {
      TANDEM_ASSIGN_OR_RETURN(out.residual,
                              UnsentResidual(update, built.block_indices, builder_.geometry()));
    }
    out.report_id = built.report_id;
    out.clip_factor = built.clip_factor;
    const UploadRequests r =
        ticket != nullptr
            ? MakeUploadRequests(std::move(built), spec_.task_id, spec_.round_id, *ticket)
            : MakeUploadRequests(std::move(built), spec_.task_id, spec_.round_id);
    if (!r.to_leader.SerializeToString(&out.to_leader) ||
        !r.to_helper.SerializeToString(&out.to_helper)) {
      return absl::InternalError("serialization failed");
    }
    return out;
  }

  RoundSpec spec_;
  ReportBuilder builder_;
  SecureRandom* random_;  // not owned
};

absl::StatusOr<std::unique_ptr<ReportEncoder>> MakeEncoder(const RoundSpec& spec,
                                                           const ReportParameters& p,
                                                           SecureRandom* random) {
  if (spec.task_id.empty() || spec.round_id == 0) {
    return absl::InvalidArgumentError("task_id and round_id are required");
  }
  TANDEM_ASSIGN_OR_RETURN(ReportBuilder builder, ReportBuilder::Create(p));
  return std::unique_ptr<ReportEncoder>(new ReportEncoderImpl(
      spec, std::move(builder), random != nullptr ? random : OpenSslRandom::Default()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReportEncoder>> ReportEncoder::Create(const RoundSpec& spec,
                                                                     SecureRandom* random) {
  ReportParameters p;
  p.dimension = spec.dimension;
  p.block_size = spec.block_size;
  p.num_groups = spec.num_groups;
  p.log_num_blocks = spec.log_num_blocks;
  p.frac_bits = spec.frac_bits;
  p.clip_l2_norm = spec.clip_l2_norm;
  p.max_summands = spec.max_summands;
  p.max_dimension = spec.max_dimension;
  p.block_selection = spec.block_selection == BlockSelection::kTopNorm
                          ? proto::BLOCK_SELECTION_TOP_NORM
                          : proto::BLOCK_SELECTION_RANDOM;
  return MakeEncoder(spec, p, random);
}

absl::StatusOr<std::unique_ptr<ReportEncoder>> ReportEncoder::CreateForRound(
    absl::string_view round_parameters, uint64_t max_dimension, SecureRandom* random) {
  proto::RoundParameters rp;
  if (round_parameters.size() > kMaxRoundParametersBytes ||
      !rp.ParseFromArray(round_parameters.data(), static_cast<int>(round_parameters.size()))) {
    return absl::InvalidArgumentError("the round parameters are too large or do not parse");
  }
  ReportParameters p = ReportParametersFromRound(rp);
  p.max_dimension = max_dimension;
  RoundSpec spec;
  spec.task_id = rp.task_id();
  spec.round_id = rp.round_id();
  spec.dimension = p.dimension;
  spec.block_size = p.block_size;
  spec.num_groups = p.num_groups;
  spec.log_num_blocks = p.log_num_blocks;
  spec.frac_bits = p.frac_bits;
  spec.clip_l2_norm = p.clip_l2_norm;
  spec.max_summands = p.max_summands;
  spec.max_dimension = max_dimension;
  spec.block_selection = p.block_selection == proto::BLOCK_SELECTION_TOP_NORM
                             ? BlockSelection::kTopNorm
                             : BlockSelection::kRandom;
  return MakeEncoder(spec, p, random);
}

}  // namespace tandem::client
