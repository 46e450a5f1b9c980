// Embedding bag: each row holds `bag_size` token ids stored as floats (exact
// integers; a negative id is padding). The output is the mean of the valid
// ids' embedding rows (zero when the bag is all padding), as in
// torch.nn.EmbeddingBag(mode="mean"). Immutable, thread-safe.
#ifndef TANDEM_ML_MODEL_EMBEDDING_BAG_H_
#define TANDEM_ML_MODEL_EMBEDDING_BAG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ml/model/layer.h"

namespace tandem::ml {

class EmbeddingBagLayer : public Layer {
 public:
  // Returns INVALID_ARGUMENT for non-positive sizes.
  static absl::StatusOr<std::unique_ptr<EmbeddingBagLayer>> Create(std::string name,
                                                                   int64_t vocab, int64_t dim,
                                                                   int64_t bag_size);
  std::string type() const override { return "embedding_bag"; }
  std::string config() const override;
  int64_t in_size() const override { return bag_size_; }
  int64_t out_size() const override { return dim_; }
  // weight [vocab, dim]; a kWeight tensor, so FedLUAR may recycle it.
  std::vector<ParamSpec> params() const override;
  // N(0, 1/dim) entries.
  void Init(absl::Span<float> params, absl::BitGenRef gen) const override;
  // Returns INVALID_ARGUMENT for an id >= vocab or a non-integer id.
  absl::Status Forward(absl::Span<const float> params, const Matrix& in,
                       Matrix* out) const override;
  // No input gradient (ids are not differentiable): grad_in is zero-filled.
  void Backward(absl::Span<const float> params, const Matrix& in, const Matrix& out,
                const Matrix& grad_out, Matrix* grad_in,
                absl::Span<float> grad_params) const override;

 private:
  EmbeddingBagLayer(std::string name, int64_t vocab, int64_t dim, int64_t bag)
      : Layer(std::move(name)), vocab_(vocab), dim_(dim), bag_size_(bag) {}
  int64_t vocab_, dim_, bag_size_;
};

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_EMBEDDING_BAG_H_
