// Internal: a client's side of private federated evaluation (issue 33
// item 5; the server side and the sensitivity argument are in
// server/core/federated_evaluation.h). The client evaluates the assigned
// model version on at most m held-out examples, clips each example's
// cross-entropy to [0, L], and encodes the version-1 metrics vector
//   [examples, correct, loss_sum / L, class_examples[C], class_correct[C]] / m
// whose L2 norm is at most sqrt(5): the round's clip, so the report builder
// never scales it and the norm proof holds.
// Thread safety: pure functions.
#ifndef TANDEM_CLIENT_INTERNAL_EVAL_METRICS_H_
#define TANDEM_CLIENT_INTERNAL_EVAL_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "proto/coordinator.pb.h"
#include "tandem/client/participant.h"

namespace tandem::client {

using EvalCounts = EvaluationCounts;  // tandem/client/participant.h

// INVALID_ARGUMENT unless metrics_version is 1, m >= 1, L in (0, 1000] and
// 2 <= C <= 10^5.
absl::Status CheckEvaluationConfig(const proto::EvaluationConfig& config);

// `model` on the first min(rows, m) examples of `data`. INVALID_ARGUMENT
// for data that does not fit the model or the config's classes.
absl::StatusOr<EvalCounts> CountEvaluation(const ml::Model& model, const ml::Dataset& data,
                                           const proto::EvaluationConfig& config);

// The metrics vector (3 + 2 C floats). INVALID_ARGUMENT for counts no
// honest evaluation produces (negative, above m, correct above examples,
// class counts not summing to the totals, a loss outside [0, examples L]).
absl::StatusOr<std::vector<float>> EncodeEvaluationMetrics(const EvalCounts& counts,
                                                           const proto::EvaluationConfig& config);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_EVAL_METRICS_H_
