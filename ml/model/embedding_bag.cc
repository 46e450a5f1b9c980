#include "ml/model/embedding_bag.h"

#include <cmath>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace tandem::ml {

absl::StatusOr<std::unique_ptr<EmbeddingBagLayer>> EmbeddingBagLayer::Create(
    std::string name, int64_t vocab, int64_t dim, int64_t bag_size) {
  if (vocab <= 0 || dim <= 0 || bag_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding bag '", name, "': sizes must be positive"));
  }
  return std::unique_ptr<EmbeddingBagLayer>(
      new EmbeddingBagLayer(std::move(name), vocab, dim, bag_size));
}

std::string EmbeddingBagLayer::config() const {
  return absl::StrCat("vocab=", vocab_, " dim=", dim_, " bag=", bag_size_);
}

std::vector<ParamSpec> EmbeddingBagLayer::params() const {
  return {{"weight", ParamKind::kWeight, {vocab_, dim_}}};
}

void EmbeddingBagLayer::Init(absl::Span<float> params, absl::BitGenRef gen) const {
  const double sd = 1.0 / std::sqrt(static_cast<double>(dim_));
  for (int64_t i = 0; i < vocab_ * dim_; ++i) {
    params[i] = static_cast<float>(absl::Gaussian(gen, 0.0, sd));
  }
}

absl::Status EmbeddingBagLayer::Forward(absl::Span<const float> params, const Matrix& in,
                                        Matrix* out) const {
  ConstMatrixMap table(params.data(), vocab_, dim_);
  out->setZero(in.rows(), dim_);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    int count = 0;
    for (int64_t j = 0; j < bag_size_; ++j) {
      const float id = in(r, j);
      if (id < 0.0f) continue;
      if (!(id < static_cast<float>(vocab_)) || id != std::floor(id)) {
        return absl::InvalidArgumentError(absl::StrCat("embedding bag '", name(), "': row ", r,
                                                       " has invalid id ", id, " (vocab ",
                                                       vocab_, ")"));
      }
      out->row(r) += table.row(static_cast<int64_t>(id));
      ++count;
    }
    if (count > 0) out->row(r) /= static_cast<float>(count);
  }
  return absl::OkStatus();
}

void EmbeddingBagLayer::Backward(absl::Span<const float> params, const Matrix& in,
                                 const Matrix& out, const Matrix& grad_out, Matrix* grad_in,
                                 absl::Span<float> grad_params) const {
  MatrixMap gtable(grad_params.data(), vocab_, dim_);
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    int count = 0;
    for (int64_t j = 0; j < bag_size_; ++j) count += in(r, j) >= 0.0f ? 1 : 0;
    if (count == 0) continue;
    const float scale = 1.0f / static_cast<float>(count);
    for (int64_t j = 0; j < bag_size_; ++j) {
      if (in(r, j) < 0.0f) continue;
      gtable.row(static_cast<int64_t>(in(r, j))) += scale * grad_out.row(r);
    }
  }
  if (grad_in != nullptr) grad_in->setZero(in.rows(), bag_size_);
}

}  // namespace tandem::ml
