// Tasks as documents (issue 33 item 1): a proto::TaskSpec (proto/task.proto)
// read from a textproto file and turned into the coordinator's options,
// every field checked first: INVALID_ARGUMENT "task_spec.<field>: <rule>"
// (a parse error names the line and column). What the spec does not set
// takes the coordinator's private defaults (quoted in proto/task.proto).
//
// Thread safety: pure functions (ReadTaskSpec and an opaque model's
// weights_file read files).
#ifndef TANDEM_SERVER_CORE_TASK_SPEC_H_
#define TANDEM_SERVER_CORE_TASK_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "ml/data/dataset.h"
#include "proto/task.pb.h"
#include "server/core/coordinator.h"

namespace tandem::server {

// The document at `path`: YAML when it ends in .yaml or .yml
// (server/core/yaml_message.h; errors name the field and line), a textproto
// otherwise. NOT_FOUND when unreadable, INVALID_ARGUMENT with the line for a
// parse error (an unknown field, a bad value).
absl::StatusOr<proto::TaskSpec> ReadTaskSpec(const std::string& path);

struct TaskFromSpec {
  // Task id, model (an MLP's hidden widths, or an opaque model's tensors and
  // initial_params), training, FedLUAR, optimizer, PREAMBLE, clipping,
  // noise, sampling, budget, rounds, deadlines, evaluation. Not set here:
  // endpoints, devices, evaluator, models_dir (the daemon's), and an MLP's
  // input_dim and num_classes (its dataset's, loaded by the daemon).
  CoordinatorOptions options;
  std::string population;
  // MLP: the dataset ("digits" or "fmnist"); empty for an opaque model.
  std::string dataset;
};

// `base_dir` resolves a relative weights_file (the spec's own directory).
absl::StatusOr<TaskFromSpec> TaskOptionsFromSpec(const proto::TaskSpec& spec,
                                                 const std::string& base_dir);

// A native model's input from its dataset (input_dim, num_classes and, for
// a layer list, input_shape [C, H, W]), checked: INVALID_ARGUMENT
// "task_spec.model.layers[i] (kind): ..." for a layer list that does not
// fit the dataset's examples.
absl::Status FitModelToDataset(const ml::Dataset& data, proto::ModelSpec* model);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_TASK_SPEC_H_
