#include "server/core/federated_evaluation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::server {

uint64_t MetricsDimension(uint32_t num_classes) { return 3 + 2 * uint64_t{num_classes}; }

double MetricsL2Bound() { return std::sqrt(5.0); }

absl::Status ValidateEvaluationOptions(const FederatedEvaluationOptions& o, uint32_t num_classes) {
  if (o.every == 0) return absl::OkStatus();
  if (o.max_examples < 1 || o.max_examples > 1000000) {
    return absl::InvalidArgumentError("evaluation max_examples must be in [1, 10^6]");
  }
  if (!(o.loss_clip > 0 && o.loss_clip <= 1000)) {
    return absl::InvalidArgumentError("evaluation loss_clip must be in (0, 1000]");
  }
  if (num_classes < 2 || num_classes > 100000) {
    return absl::InvalidArgumentError("evaluation needs a model of 2 to 10^5 classes");
  }
  if (!std::isfinite(o.noise_multiplier)) {
    return absl::InvalidArgumentError("evaluation noise_multiplier must be finite");
  }
  return absl::OkStatus();
}

proto::EvaluationConfig EvaluationConfigOf(const FederatedEvaluationOptions& o,
                                           uint32_t num_classes) {
  proto::EvaluationConfig c;
  c.set_max_examples(o.max_examples);
  c.set_loss_clip(o.loss_clip);
  c.set_num_classes(num_classes);
  c.set_metrics_version(1);
  return c;
}

absl::StatusOr<SecureSum> EvaluationSum(const SecureSumConfig& training, uint32_t num_classes,
                                        double noise_multiplier) {
  SecureSumConfig c = training;
  c.model_dimension = MetricsDimension(num_classes);
  // One block per group of at most 64 values: every value is sent (the
  // vector is tiny; sparsity would only add variance).
  c.log_blocks_per_group = 0;
  c.block_size = static_cast<uint32_t>(std::min<uint64_t>(64, c.model_dimension));
  c.clip_l2_norm = MetricsL2Bound();
  c.noise_multiplier = noise_multiplier;
  c.block_selection = proto::BLOCK_SELECTION_RANDOM;  // scale 1 with one block
  return SecureSum::Create(c);
}

absl::StatusOr<proto::FederatedEvaluation> DecodeEvaluation(const DecodedAggregate& aggregate,
                                                            const proto::RoundParameters& round,
                                                            const proto::EvaluationConfig& config,
                                                            uint64_t model_version) {
  const uint32_t classes = config.num_classes();
  if (aggregate.sum.size() < MetricsDimension(classes)) {
    return absl::InvalidArgumentError(absl::StrCat("the evaluation sum has ", aggregate.sum.size(),
                                                   " values, the metrics ",
                                                   MetricsDimension(classes)));
  }
  const double m = config.max_examples();
  proto::FederatedEvaluation e;
  e.set_model_version(model_version);
  e.set_reports(aggregate.reports);
  e.set_examples(aggregate.sum[0] * m);
  e.set_correct(aggregate.sum[1] * m);
  e.set_loss_sum(aggregate.sum[2] * m * config.loss_clip());
  for (uint32_t c = 0; c < classes; ++c) {
    e.add_class_examples(aggregate.sum[3 + c] * m);
    e.add_class_correct(aggregate.sum[3 + classes + c] * m);
  }
  // sigma per server in integer units -> vector units; two independent draws.
  const double unit = std::sqrt(2.0 * round.noise_variance()) /
                      std::ldexp(1.0, static_cast<int>(round.fixed_point().fractional_bits()));
  e.set_count_stddev(unit * m);
  e.set_loss_stddev(unit * m * config.loss_clip());
  if (e.examples() > 0) {
    e.set_accuracy(std::clamp(e.correct() / e.examples(), 0.0, 1.0));
    e.set_loss(std::max(0.0, e.loss_sum() / e.examples()));
  }
  return e;
}

}  // namespace tandem::server
