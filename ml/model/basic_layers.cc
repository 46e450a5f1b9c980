#include "ml/model/basic_layers.h"

#include <cmath>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
}  // namespace

absl::StatusOr<std::unique_ptr<DenseLayer>> DenseLayer::Create(std::string name, int64_t in,
                                                               int64_t out) {
  if (in <= 0 || out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense layer '", name, "': sizes must be positive, got ", in, "->", out));
  }
  return std::unique_ptr<DenseLayer>(new DenseLayer(std::move(name), in, out));
}

std::string DenseLayer::config() const { return absl::StrCat(in_, "->", out_); }

std::vector<ParamSpec> DenseLayer::params() const {
  return {{"weight", ParamKind::kWeight, {out_, in_}}, {"bias", ParamKind::kBias, {out_}}};
}

void DenseLayer::Init(absl::Span<float> params, absl::BitGenRef gen) const {
  const double limit = std::sqrt(6.0 / static_cast<double>(in_ + out_));
  for (int64_t i = 0; i < in_ * out_; ++i) {
    params[i] = static_cast<float>(absl::Uniform(gen, -limit, limit));
  }
  for (int64_t i = in_ * out_; i < in_ * out_ + out_; ++i) params[i] = 0.0f;
}

absl::Status DenseLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                 Matrix* out) const {
  ConstMatrixMap w(params.data(), out_, in_);
  Eigen::Map<const Eigen::RowVectorXf> b(params.data() + in_ * out_, out_);
  out->resize(in.rows(), out_);
  out->noalias() = in * w.transpose();
  out->rowwise() += b;
  return absl::OkStatus();
}

void DenseLayer::Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                          const Matrix& grad_out, Matrix* grad_in,
                          absl::Span<float> grad_params) const {
  ConstMatrixMap w(params.data(), out_, in_);
  MatrixMap gw(grad_params.data(), out_, in_);
  Eigen::Map<Eigen::RowVectorXf> gb(grad_params.data() + in_ * out_, out_);
  gw.noalias() += grad_out.transpose() * in;
  gb += grad_out.colwise().sum();
  if (grad_in != nullptr) {
    grad_in->resize(in.rows(), in_);
    grad_in->noalias() = grad_out * w;
  }
}

absl::StatusOr<std::unique_ptr<ActivationLayer>> ActivationLayer::Create(std::string name,
                                                                         Activation kind,
                                                                         int64_t size) {
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("activation '", name, "': size must be positive, got ", size));
  }
  return std::unique_ptr<ActivationLayer>(new ActivationLayer(std::move(name), kind, size));
}

std::string ActivationLayer::config() const { return absl::StrCat(size_); }

absl::Status ActivationLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                      Matrix* out) const {
  if (kind_ == Activation::kRelu) {
    *out = in.cwiseMax(0.0f);
  } else {
    *out = in.unaryExpr([](float x) {
      return static_cast<float>(0.5 * x * (1.0 + std::erf(x * kInvSqrt2)));
    });
  }
  return absl::OkStatus();
}

void ActivationLayer::Backward(absl::Span<const float> params, const Matrix& in,
                               const Matrix& out, const Matrix& grad_out, Matrix* grad_in,
                               absl::Span<float> grad_params) const {
  if (grad_in == nullptr) return;
  if (kind_ == Activation::kRelu) {
    *grad_in = (in.array() > 0.0f).select(grad_out, 0.0f);
  } else {
    // d/dx [x Phi(x)] = Phi(x) + x phi(x).
    *grad_in = in.binaryExpr(grad_out, [](float x, float g) {
      const double cdf = 0.5 * (1.0 + std::erf(x * kInvSqrt2));
      const double pdf = kInvSqrt2Pi * std::exp(-0.5 * static_cast<double>(x) * x);
      return static_cast<float>(g * (cdf + x * pdf));
    });
  }
}

absl::StatusOr<std::unique_ptr<LayerNormLayer>> LayerNormLayer::Create(std::string name,
                                                                       int64_t size,
                                                                       float eps) {
  if (size < 2 || !(eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer norm '", name, "': needs size >= 2 and eps > 0, got ", size, ", ", eps));
  }
  return std::unique_ptr<LayerNormLayer>(new LayerNormLayer(std::move(name), size, eps));
}

std::string LayerNormLayer::config() const { return absl::StrCat(size_, " eps=", eps_); }

std::vector<ParamSpec> LayerNormLayer::params() const {
  return {{"gamma", ParamKind::kNormScale, {size_}}, {"beta", ParamKind::kBias, {size_}}};
}

void LayerNormLayer::Init(absl::Span<float> params, absl::BitGenRef gen) const {
  for (int64_t i = 0; i < size_; ++i) params[i] = 1.0f;
  for (int64_t i = size_; i < 2 * size_; ++i) params[i] = 0.0f;
}

absl::Status LayerNormLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                     Matrix* out) const {
  Eigen::Map<const Eigen::RowVectorXf> gamma(params.data(), size_);
  Eigen::Map<const Eigen::RowVectorXf> beta(params.data() + size_, size_);
  out->resize(in.rows(), size_);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    const float mean = in.row(r).mean();
    const float var = (in.row(r).array() - mean).square().mean();
    const float inv = 1.0f / std::sqrt(var + eps_);
    out->row(r) = ((in.row(r).array() - mean) * inv).matrix().cwiseProduct(gamma) + beta;
  }
  return absl::OkStatus();
}

void LayerNormLayer::Backward(absl::Span<const float> params, const Matrix& in,
                              const Matrix& out, const Matrix& grad_out, Matrix* grad_in,
                              absl::Span<float> grad_params) const {
  Eigen::Map<const Eigen::RowVectorXf> gamma(params.data(), size_);
  Eigen::Map<Eigen::RowVectorXf> ggamma(grad_params.data(), size_);
  Eigen::Map<Eigen::RowVectorXf> gbeta(grad_params.data() + size_, size_);
  if (grad_in != nullptr) grad_in->resize(in.rows(), size_);
  const float n = static_cast<float>(size_);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    const float mean = in.row(r).mean();
    const float var = (in.row(r).array() - mean).square().mean();
    const float inv = 1.0f / std::sqrt(var + eps_);
    const Eigen::RowVectorXf xhat = (in.row(r).array() - mean) * inv;
    ggamma += grad_out.row(r).cwiseProduct(xhat);
    gbeta += grad_out.row(r);
    if (grad_in != nullptr) {
      // dx = inv/n * (n*dxhat - sum(dxhat) - xhat * sum(dxhat*xhat)).
      const Eigen::RowVectorXf dxhat = grad_out.row(r).cwiseProduct(gamma);
      const float s1 = dxhat.sum();
      const float s2 = dxhat.dot(xhat);
      grad_in->row(r) = (inv / n) * (n * dxhat.array() - s1 - xhat.array() * s2).matrix();
    }
  }
}

}  // namespace tandem::ml
