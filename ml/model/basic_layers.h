// Dense, element-wise activations (ReLU, GELU) and layer normalisation.
// All are immutable after Create() and thread-safe (see layer.h).
#ifndef TANDEM_ML_MODEL_BASIC_LAYERS_H_
#define TANDEM_ML_MODEL_BASIC_LAYERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ml/model/layer.h"

namespace tandem::ml {

// y = x W^T + b with W of shape [out, in] (row-major) and b of shape [out].
// Init: W ~ U(-sqrt(6/(in+out)), +) (Glorot uniform), b = 0.
class DenseLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT when in or out is not positive.
  static absl::StatusOr<std::unique_ptr<DenseLayer>> Create(std::string name, int64_t in,
                                                            int64_t out);
  std::string type() const override { return "dense"; }
  std::string config() const override;
  int64_t in_size() const override { return in_; }
  int64_t out_size() const override { return out_; }
  std::vector<ParamSpec> params() const override;
  void Init(absl::Span<float> params, absl::BitGenRef gen) const override;
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  DenseLayer(std::string name, int64_t in, int64_t out)
      : Layer(std::move(name)), in_(in), out_(out) {}
  int64_t in_, out_;
};

enum class Activation { kRelu, kGelu };

// Element-wise ReLU or exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016).
class ActivationLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT when size is not positive.
  static absl::StatusOr<std::unique_ptr<ActivationLayer>> Create(std::string name,
                                                                 Activation kind,
                                                                 int64_t size);
  std::string type() const override { return kind_ == Activation::kRelu ? "relu" : "gelu"; }
  std::string config() const override;
  int64_t in_size() const override { return size_; }
  int64_t out_size() const override { return size_; }
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  ActivationLayer(std::string name, Activation kind, int64_t size)
      : Layer(std::move(name)), kind_(kind), size_(size) {}
  Activation kind_;
  int64_t size_;
};

// Layer normalisation over the features of each row (Ba et al. 2016):
// y = gamma * (x - mean) / sqrt(var + eps) + beta. gamma (kNormScale) = 1,
// beta (kBias) = 0 at init.
class LayerNormLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT when size < 2 or eps <= 0.
  static absl::StatusOr<std::unique_ptr<LayerNormLayer>> Create(std::string name,
                                                                int64_t size,
                                                                float eps = 1e-5f);
  std::string type() const override { return "layer_norm"; }
  std::string config() const override;
  int64_t in_size() const override { return size_; }
  int64_t out_size() const override { return size_; }
  std::vector<ParamSpec> params() const override;
  void Init(absl::Span<float> params, absl::BitGenRef gen) const override;
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  LayerNormLayer(std::string name, int64_t size, float eps)
      : Layer(std::move(name)), size_(size), eps_(eps) {}
  int64_t size_;
  float eps_;
};

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_BASIC_LAYERS_H_
