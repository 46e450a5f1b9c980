#include "client/internal/eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::client {

absl::Status CheckEvaluationConfig(const proto::EvaluationConfig& c) {
  if (c.metrics_version() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation metrics version ", c.metrics_version(), " is not supported"));
  }
  if (c.max_examples() < 1 || !(c.loss_clip() > 0 && c.loss_clip() <= 1000) ||
      c.num_classes() < 2 || c.num_classes() > 100000) {
    return absl::InvalidArgumentError(
        "evaluation config needs max_examples >= 1, loss_clip in (0, 1000], 2 <= classes <= 1e5");
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalCounts> CountEvaluation(const ml::Model& model, const ml::Dataset& data,
                                           const proto::EvaluationConfig& config) {
  TANDEM_RETURN_IF_ERROR(CheckEvaluationConfig(config));
  const int64_t classes = config.num_classes();
  if (data.num_classes != classes || model.output_size() != classes ||
      data.features.cols() != model.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "held-out data (", data.features.cols(), " features, ", data.num_classes,
        " classes) does not fit the evaluated model (", model.input_size(), ", ", classes, ")"));
  }
  EvalCounts out;
  out.class_examples.assign(classes, 0);
  out.class_correct.assign(classes, 0);
  const int64_t n = std::min<int64_t>(data.size(), config.max_examples());
  constexpr int64_t kChunk = 256;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t rows = std::min(kChunk, n - start);
    TANDEM_ASSIGN_OR_RETURN(const ml::Matrix logits,
                            model.Predict(data.features.middleRows(start, rows)));
    for (int64_t r = 0; r < rows; ++r) {
      const int label = data.labels[start + r];
      Eigen::Index best = 0;
      const double top = logits.row(r).maxCoeff(&best);
      double z = 0;
      for (int64_t c = 0; c < classes; ++c) z += std::exp(static_cast<double>(logits(r, c)) - top);
      const double loss = top + std::log(z) - static_cast<double>(logits(r, label));
      if (!std::isfinite(loss)) {
        return absl::InvalidArgumentError("the evaluated model gives a non-finite loss");
      }
      out.loss_sum += std::clamp(loss, 0.0, config.loss_clip());
      ++out.examples;
      ++out.class_examples[label];
      if (best == label) {
        ++out.correct;
        ++out.class_correct[label];
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<float>> EncodeEvaluationMetrics(const EvalCounts& e,
                                                           const proto::EvaluationConfig& config) {
  TANDEM_RETURN_IF_ERROR(CheckEvaluationConfig(config));
  const uint32_t classes = config.num_classes();
  const double m = config.max_examples();
  const auto sum = [](const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  };
  const bool per_class_ok =
      e.class_examples.size() == classes && e.class_correct.size() == classes &&
      sum(e.class_examples) == e.examples && sum(e.class_correct) == e.correct;
  bool counts_ok = per_class_ok && e.examples >= 0 && e.examples <= m && e.correct >= 0 &&
                   e.correct <= e.examples && e.loss_sum >= 0 &&
                   e.loss_sum <= e.examples * config.loss_clip();
  for (uint32_t c = 0; counts_ok && c < classes; ++c) {
    counts_ok = e.class_examples[c] >= 0 && e.class_correct[c] >= 0 &&
                e.class_correct[c] <= e.class_examples[c];
  }
  if (!counts_ok) {
    return absl::InvalidArgumentError(
        "evaluation counts are inconsistent (negative, above max_examples, correct above "
        "examples, per-class counts not summing to the totals, or loss out of range)");
  }
  std::vector<float> v(3 + 2 * classes);
  v[0] = static_cast<float>(e.examples / m);
  v[1] = static_cast<float>(e.correct / m);
  v[2] = static_cast<float>(e.loss_sum / (m * config.loss_clip()));
  for (uint32_t c = 0; c < classes; ++c) {
    v[3 + c] = static_cast<float>(e.class_examples[c] / m);
    v[3 + classes + c] = static_cast<float>(e.class_correct[c] / m);
  }
  return v;
}

}  // namespace tandem::client
