// ReportEncoder (client/include/tandem/client/report_encoder.h) over the
// internal ReportBuilder.
#include "tandem/client/report_encoder.h"

#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/report_builder.h"
#include "proto/aggregator.pb.h"

namespace tandem::client {
namespace {

class ReportEncoderImpl : public ReportEncoder {
 public:
  ReportEncoderImpl(RoundSpec spec, ReportBuilder builder, SecureRandom* random)
      : spec_(std::move(spec)), builder_(std::move(builder)), random_(random) {}

  absl::StatusOr<EncodedReport> Encode(absl::Span<const float> update) const override {
    TANDEM_ASSIGN_OR_RETURN(BuiltReport built, builder_.Build(update, random_));
    EncodedReport out;
    out.report_id = built.report_id;
    out.clip_factor = built.clip_factor;
    const UploadRequests r = MakeUploadRequests(std::move(built), spec_.task_id, spec_.round_id);
    if (!r.to_leader.SerializeToString(&out.to_leader) ||
        !r.to_helper.SerializeToString(&out.to_helper)) {
      return absl::InternalError("serialization failed");
    }
    return out;
  }

 private:
  RoundSpec spec_;
  ReportBuilder builder_;
  SecureRandom* random_;  // not owned
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReportEncoder>> ReportEncoder::Create(const RoundSpec& spec,
                                                                     SecureRandom* random) {
  if (spec.task_id.empty() || spec.round_id == 0) {
    return absl::InvalidArgumentError("task_id and round_id are required");
  }
  ReportParameters p;
  p.dimension = spec.dimension;
  p.block_size = spec.block_size;
  p.num_groups = spec.num_groups;
  p.log_num_blocks = spec.log_num_blocks;
  p.frac_bits = spec.frac_bits;
  p.clip_l2_norm = spec.clip_l2_norm;
  p.max_summands = spec.max_summands;
  TANDEM_ASSIGN_OR_RETURN(ReportBuilder builder, ReportBuilder::Create(p));
  return std::unique_ptr<ReportEncoder>(new ReportEncoderImpl(
      spec, std::move(builder), random != nullptr ? random : OpenSslRandom::Default()));
}

}  // namespace tandem::client
