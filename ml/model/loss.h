// Softmax cross-entropy over logits, one sample per row.
#ifndef TANDEM_ML_MODEL_LOSS_H_
#define TANDEM_ML_MODEL_LOSS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/layer.h"

namespace tandem::ml {

struct LossResult {
  double mean_loss = 0.0;        // mean over rows of -log softmax(logits)[label]
  int64_t correct = 0;           // rows whose argmax equals the label
  std::vector<float> per_sample; // filled only when requested
};

// Computes the mean loss and, when `grad` is non-null, dL/dlogits of the
// *sum* of per-row losses scaled by `grad_scale` (callers pass 1/batch for a
// mean). Numerically stable (max subtraction, log-sum-exp in double).
// Returns INVALID_ARGUMENT when labels.size() != rows or a label is outside
// [0, cols).
absl::StatusOr<LossResult> SoftmaxCrossEntropy(const Matrix& logits,
                                               absl::Span<const int> labels, Matrix* grad,
                                               float grad_scale = 1.0f,
                                               bool want_per_sample = false);

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_LOSS_H_
