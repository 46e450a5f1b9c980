// A feed-forward model held as a sequence of named layers over one flat
// parameter vector.
//
// The flat vector is what federated learning ships around: Flatten() /
// SetParams() convert between the model and "one float update vector", and
// param_infos() names every tensor in it (layer, weight vs bias, shape,
// offset), which is what FedLUAR's per-layer scores and recycling use.
//
// Lifecycle: built once by Create(); parameters change through
// mutable_params()/SetParams(). Thread safety: const methods (Forward,
// Backward, Predict) may run concurrently; mutation needs exclusive access.
// Layers are immutable and shared between clones.
#ifndef TANDEM_ML_MODEL_MODEL_H_
#define TANDEM_ML_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/layer.h"

namespace tandem::ml {

// One tensor of the flat parameter vector.
struct ParamInfo {
  std::string name;   // "<layer>.<param>", e.g. "conv1.weight"
  std::string layer;  // owning layer name
  ParamKind kind;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat vector
  int64_t size = 0;
  // FedLUAR candidates: multi-dimensional weight tensors only (Kim et al.,
  // NeurIPS 2025, reference code recycles tensors with len(shape) > 1).
  bool recyclable() const { return kind == ParamKind::kWeight && shape.size() > 1; }
};

// Appends a tensor of a model whose architecture tandem does not know (an
// opaque task's named tensors) after the last one of `layout`: its own
// layer, a weight when of rank >= 2 (so FedLUAR may recycle it), else a
// bias. REQUIRES every dimension >= 1 and the size to fit (the callers
// check their bounds first).
void AppendNamedTensor(std::vector<ParamInfo>& layout, std::string name,
                       std::vector<int64_t> shape);

// Activations of one forward pass (owned by the caller, reused across calls).
struct Activations {
  Matrix input;
  std::vector<Matrix> outputs;  // outputs[i] = output of layer i
  const Matrix& logits() const { return outputs.back(); }
  // Input of the last layer: the penultimate representation (CoIDO uses it
  // as the per-sample embedding).
  const Matrix& embeddings() const {
    return outputs.size() >= 2 ? outputs[outputs.size() - 2] : input;
  }
};

class Model {
 public:
  // Returns INVALID_ARGUMENT when `layers` is empty, contains null, has
  // duplicate names, or consecutive sizes do not chain.
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::vector<std::unique_ptr<Layer>> layers);

  // Deep copy of the parameters; layers are shared (immutable).
  std::unique_ptr<Model> Clone() const;

  // Initialises every layer's parameters from `gen` (layer order).
  void Init(absl::BitGenRef gen);
  // Same, from a std::mt19937_64 seeded with `seed`.
  void InitFromSeed(uint64_t seed);

  int64_t input_size() const { return layers_.front()->in_size(); }
  int64_t output_size() const { return layers_.back()->out_size(); }
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  size_t num_layers() const { return layers_.size(); }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  const std::vector<ParamInfo>& param_infos() const { return infos_; }

  absl::Span<const float> params() const { return params_; }
  absl::Span<float> mutable_params() { return absl::MakeSpan(params_); }
  std::vector<float> Flatten() const { return params_; }
  // Returns INVALID_ARGUMENT when flat.size() != num_params() or a value is
  // not finite (wire/disk input).
  absl::Status SetParams(absl::Span<const float> flat);

  // Architecture string (layer names, types, configs, tensor shapes) used to
  // match checkpoints and federated updates to a model.
  std::string Fingerprint() const;

  // Runs all layers. Returns INVALID_ARGUMENT when in.cols() != input_size()
  // or a layer rejects its input.
  absl::Status Forward(const Matrix& in, Activations* acts) const;
  // ADDS dL/dparams into `grad` (size num_params()) given dL/dlogits.
  // Returns INVALID_ARGUMENT on size mismatches.
  // REQUIRES: `acts` comes from a successful Forward on these parameters.
  absl::Status Backward(const Activations& acts, const Matrix& grad_logits,
                        absl::Span<float> grad) const;
  // Logits only.
  absl::StatusOr<Matrix> Predict(const Matrix& in) const;

 private:
  Model(std::vector<std::shared_ptr<const Layer>> layers, std::vector<ParamInfo> infos,
        std::vector<int64_t> layer_offsets, int64_t total);
  absl::Span<const float> LayerSlice(size_t i, absl::Span<const float> all) const;

  std::vector<std::shared_ptr<const Layer>> layers_;
  std::vector<ParamInfo> infos_;
  std::vector<int64_t> layer_offsets_;  // size num_layers()+1
  std::vector<float> params_;
};

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_MODEL_H_
