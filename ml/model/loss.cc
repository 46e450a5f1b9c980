#include "ml/model/loss.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::ml {

absl::StatusOr<LossResult> SoftmaxCrossEntropy(const Matrix& logits,
                                               absl::Span<const int> labels, Matrix* grad,
                                               float grad_scale, bool want_per_sample) {
  if (static_cast<Eigen::Index>(labels.size()) != logits.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("cross-entropy: ", labels.size(),
                                                   " labels for ", logits.rows(), " rows"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= logits.cols()) {
      return absl::InvalidArgumentError(absl::StrCat("cross-entropy: label ", labels[i],
                                                     " of row ", i, " outside [0, ",
                                                     logits.cols(), ")"));
    }
  }
  LossResult result;
  if (want_per_sample) result.per_sample.resize(labels.size());
  if (grad != nullptr) grad->resize(logits.rows(), logits.cols());
  double total = 0.0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    Eigen::Index argmax = 0;
    const float mx = logits.row(r).maxCoeff(&argmax);
    double sum = 0.0;
    for (Eigen::Index c = 0; c < logits.cols(); ++c) sum += std::exp(double{logits(r, c)} - mx);
    const double log_z = std::log(sum) + mx;
    const double loss = log_z - logits(r, labels[r]);
    total += loss;
    if (argmax == labels[r]) ++result.correct;
    if (want_per_sample) result.per_sample[r] = static_cast<float>(loss);
    if (grad != nullptr) {
      for (Eigen::Index c = 0; c < logits.cols(); ++c) {
        const double p = std::exp(double{logits(r, c)} - log_z);
        (*grad)(r, c) = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) * grad_scale);
      }
    }
  }
  result.mean_loss = logits.rows() > 0 ? total / static_cast<double>(logits.rows()) : 0.0;
  return result;
}

}  // namespace tandem::ml
