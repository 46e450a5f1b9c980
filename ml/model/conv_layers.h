// 2-D convolution (im2col + GEMM) and max/average pooling over C x H x W rows.
// Immutable after Create(), thread-safe (see layer.h).
#ifndef TANDEM_ML_MODEL_CONV_LAYERS_H_
#define TANDEM_ML_MODEL_CONV_LAYERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ml/model/layer.h"

namespace tandem::ml {

// Shape of one image-like sample.
struct ImageShape {
  int64_t channels = 0, height = 0, width = 0;
  int64_t size() const { return channels * height * width; }
};

struct Conv2DOptions {
  int64_t out_channels = 0;
  int64_t kernel = 3;   // square kernel side
  int64_t stride = 1;
  int64_t padding = 0;  // zero padding on every side
};

// Cross-correlation with weight [out_c, in_c * k * k] and bias [out_c]. The
// forward pass unfolds each sample into a (in_c*k*k) x (oh*ow) column matrix
// (im2col) and multiplies it by the weight with Eigen's GEMM; the backward pass
// does the two transposed GEMMs and folds the column gradient back (col2im).
// Init: He uniform U(-sqrt(6/fan_in), +), bias 0.
class Conv2DLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT for non-positive sizes, negative padding, or a
  // kernel larger than the padded input.
  static absl::StatusOr<std::unique_ptr<Conv2DLayer>> Create(std::string name, ImageShape in,
                                                             Conv2DOptions options);
  std::string type() const override { return "conv2d"; }
  std::string config() const override;
  int64_t in_size() const override { return in_.size(); }
  int64_t out_size() const override { return out_.size(); }
  ImageShape out_shape() const { return out_; }
  std::vector<ParamSpec> params() const override;
  void Init(absl::Span<float> params, absl::BitGenRef gen) const override;
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  Conv2DLayer(std::string name, ImageShape in, ImageShape out, Conv2DOptions o)
      : Layer(std::move(name)), in_(in), out_(out), opt_(o) {}
  // Unfolds one sample into `col`, a (in_c*k*k) x (oh*ow) block whose rows
  // are `ld` floats apart (several samples share one column matrix).
  void Im2Col(const float* image, float* col, int64_t ld) const;
  // Adds the folded-back column block (same layout) into `image`.
  void Col2ImAdd(const float* col, int64_t ld, float* image) const;
  ImageShape in_, out_;
  Conv2DOptions opt_;
};

enum class PoolKind { kMax, kAverage };

// Pooling with a square window `kernel` and `stride`, no padding, per channel.
// Max pooling routes the gradient to the first maximal element of a window.
class Pool2DLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT for non-positive sizes or a window larger than
  // the input.
  static absl::StatusOr<std::unique_ptr<Pool2DLayer>> Create(std::string name, PoolKind kind,
                                                             ImageShape in, int64_t kernel,
                                                             int64_t stride);
  std::string type() const override {
    return kind_ == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
  }
  std::string config() const override;
  int64_t in_size() const override { return in_.size(); }
  int64_t out_size() const override { return out_.size(); }
  ImageShape out_shape() const { return out_; }
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  Pool2DLayer(std::string name, PoolKind kind, ImageShape in, ImageShape out, int64_t k,
              int64_t s)
      : Layer(std::move(name)), kind_(kind), in_(in), out_(out), kernel_(k), stride_(s) {}
  PoolKind kind_;
  ImageShape in_, out_;
  int64_t kernel_, stride_;
};

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_CONV_LAYERS_H_
