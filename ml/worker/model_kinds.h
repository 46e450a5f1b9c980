// The kinds of model tandem-worker can hold (proto/worker.proto ModelHeader)
// and their wire form: every model is a list of named float32 tensors whose
// names and shapes follow from (kind, config); BuildModelWeights checks a
// received list against that layout before anything is stored, and
// ModelTensors turns held weights back into the list (ReadModel).
//
//   kind               config keys                          typed weights
//   tensors            (none)                               TensorSet, any names
//   ren                dim heads layers                     kernels::RenWeights
//   trajmamba.encoder  d_model d_state head_dim expand      search::TrajMambaWeights
//                      d_conv layers road_vocab [chunk]
//   trajmamba.mask     dim hidden                           search::MaskGeneratorWeights
//   spotlight.hash     dim                                  kernels::SpotlightHashWeights
//   mlp                in classes hidden_layers hidden0..   TensorSet (ml::MakeMlp params)
//   cnn                channels height width classes        TensorSet (ml::MakeCnn params)
//                      conv1 conv2 hidden
//
// Tensor names: the struct field names, with "layers.<i>." (REN),
// "<branch>." and "<branch>.layers.<i>." (TrajMamba, branch gps / road)
// prefixes; mlp / cnn use ml::Model's param names ("conv1.weight", ...).
// Thread safety: pure functions.
#ifndef TANDEM_ML_WORKER_MODEL_KINDS_H_
#define TANDEM_ML_WORKER_MODEL_KINDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/search/trajmamba.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/tensor.h"
#include "ml/model/model.h"

namespace tandem::ml::worker {

struct NamedTensor {
  std::string name;
  kernels::Tensor value;
};
using TensorSet = std::vector<NamedTensor>;
using ModelConfig = std::map<std::string, int64_t>;

// The weights as the kernels consume them (no copy per Run).
using ModelWeights =
    std::variant<TensorSet, kernels::RenWeights, kernels::search::TrajMambaWeights,
                 kernels::search::MaskGeneratorWeights, kernels::SpotlightHashWeights>;

struct TensorLayout {
  std::string name;
  std::vector<int64_t> shape;
};

// The kinds above, sorted.
std::vector<std::string> ModelKinds();

// The expected tensors of (kind, config), in wire order. INVALID_ARGUMENT
// for an unknown kind, a missing or unknown config key, or sizes the kind's
// library refuses; "tensors" has no fixed layout (empty result).
// Layouts over `max_elements` float32 values in total are refused before
// anything is allocated (RESOURCE_EXHAUSTED "out of memory").
absl::StatusOr<std::vector<TensorLayout>> ModelLayout(absl::string_view kind,
                                                      const ModelConfig& config,
                                                      int64_t max_elements);

// Checks `tensors` against the layout (same names, each once, same shapes;
// "tensors": unique non-empty names) and that every value is finite, then
// moves them into the typed weights. INVALID_ARGUMENT naming the first
// offending tensor.
absl::StatusOr<ModelWeights> BuildModelWeights(absl::string_view kind, const ModelConfig& config,
                                               TensorSet tensors, int64_t max_elements);

// The held tensors in wire order (copies).
TensorSet ModelTensors(const ModelWeights& weights);
// Calls fn(name, tensor) for each held tensor in wire order, without a copy.
void ForEachModelTensor(const ModelWeights& weights,
                        absl::FunctionRef<void(const std::string&, const kernels::Tensor&)> fn);

// Bytes of float32 data held by the weights.
int64_t ModelWeightBytes(const ModelWeights& weights);

// The zoo model of kind "mlp" / "cnn" (parameters zero), for checkpoint
// loading and to check layouts. INVALID_ARGUMENT for another kind or a bad
// config, RESOURCE_EXHAUSTED "out of memory" over max_elements parameters
// (checked before allocating).
absl::StatusOr<std::unique_ptr<Model>> MakeZooModel(absl::string_view kind,
                                                    const ModelConfig& config,
                                                    int64_t max_elements);

// Splits a zoo model's flat parameters into its named tensors.
TensorSet ZooModelTensors(const Model& model);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_MODEL_KINDS_H_
