// Layer interface of the tandem training library.
//
// A layer is a pure function of (parameters, input) -> output plus its
// backward pass. It owns no parameters and no activations: the Model holds all
// parameters in one flat float vector and hands each layer its own slice, and
// the caller (Model / GradientEngine) holds the activations. That makes a
// layer safe to use from several threads at once (const methods only), which
// is how data-parallel shards of a batch run on oneTBB without copies of the
// model.
//
// Activations are row-major matrices, one sample per row. Image tensors are
// flattened as C x H x W (channel-major) inside a row.
#ifndef TANDEM_ML_MODEL_LAYER_H_
#define TANDEM_ML_MODEL_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tandem::ml {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using Vector = Eigen::VectorXf;

// What a parameter tensor is. FedLUAR recycles only multi-dimensional weight
// tensors (kernels, embeddings); biases and normalisation scales never.
enum class ParamKind { kWeight, kBias, kNormScale };

// One parameter tensor of a layer. `name` is relative to the layer ("weight").
struct ParamSpec {
  std::string name;
  ParamKind kind;
  std::vector<int64_t> shape;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Stateless layer. Implementations are immutable after Create() and all
// methods are thread-safe.
class Layer {
 public:
  virtual ~Layer() = default;

  // Layer name, unique inside a model ("conv1").
  const std::string& name() const { return name_; }
  // Type tag used in checkpoints' architecture fingerprint ("dense").
  virtual std::string type() const = 0;
  // Human-readable configuration, part of the fingerprint ("784->128").
  virtual std::string config() const = 0;
  // Features per sample in and out.
  virtual int64_t in_size() const = 0;
  virtual int64_t out_size() const = 0;
  // Parameter tensors in the order they are laid out in the layer's slice.
  virtual std::vector<ParamSpec> params() const { return {}; }
  int64_t num_params() const;

  // Writes initial values into `params` (size num_params()).
  virtual void Init(absl::Span<float> params, absl::BitGenRef gen) const {}

  // out = f(params, in). `in` has in_size() columns (checked by the Model);
  // `out` is resized. Returns INVALID_ARGUMENT for inputs the layer cannot
  // interpret (e.g. out-of-range ids of an embedding bag).
  virtual absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                               Matrix* out) const = 0;

  // Given dL/d(out), ADDS dL/d(params) into `grad_params` (same layout as
  // params) and writes dL/d(in) into `grad_in` (resized) when it is non-null.
  // REQUIRES: `in` and `out` are the arguments/result of a successful Forward.
  virtual void Backward(absl::Span<const float> params, const Matrix& in,
                        const Matrix& out, const Matrix& grad_out,
                        Matrix* grad_in, absl::Span<float> grad_params) const = 0;

 protected:
  explicit Layer(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

inline int64_t Layer::num_params() const {
  int64_t n = 0;
  for (const ParamSpec& p : params()) n += p.size();
  return n;
}

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_LAYER_H_
