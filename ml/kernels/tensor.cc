#include "ml/kernels/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::ml::kernels {

absl::StatusOr<int64_t> Tensor::NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension ", d, " in shape [", absl::StrJoin(shape, ", "), "]"));
    }
    if (d != 0 && n > kMaxTensorElements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(shape, ", "), "] exceeds ", kMaxTensorElements,
                       " elements"));
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<Tensor> Tensor::Zeros(std::vector<int64_t> shape) {
  auto n = NumElements(shape);
  if (!n.ok()) return n.status();
  return Tensor(std::move(shape), std::vector<float>(static_cast<size_t>(*n), 0.0f));
}

absl::StatusOr<Tensor> Tensor::FromData(std::vector<int64_t> shape, std::vector<float> data) {
  auto n = NumElements(shape);
  if (!n.ok()) return n.status();
  if (*n != static_cast<int64_t>(data.size())) {
    return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ", "),
                                                   "] needs ", *n, " elements, got ",
                                                   data.size()));
  }
  return Tensor(std::move(shape), std::move(data));
}

std::string Tensor::ShapeString() const {
  return absl::StrCat("[", absl::StrJoin(shape_, ", "), "]");
}

absl::Status CheckRank(const Tensor& t, int rank, const char* what) {
  if (t.rank() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must have rank ", rank, ", got shape ", t.ShapeString()));
  }
  for (int64_t d : t.shape()) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " must have positive dimensions, got ", t.ShapeString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml::kernels
