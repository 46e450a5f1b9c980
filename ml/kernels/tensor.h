// A shaped float32 buffer: the value type every kernel in ml/kernels takes
// and returns. Row-major, owned, copyable. Backend-neutral: no Eigen, TBB or
// CUDA in this header.
//
// Thread safety: a const Tensor may be read from many threads; mutation needs
// external synchronisation.
#ifndef TANDEM_ML_KERNELS_TENSOR_H_
#define TANDEM_ML_KERNELS_TENSOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml::kernels {

// Upper bound on the element count of one tensor (2^31 - 1 floats, 8 GiB),
// so that products of dimensions never overflow and indices fit in int64.
inline constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

class Tensor {
 public:
  Tensor() = default;

  // A zero-filled tensor. Returns INVALID_ARGUMENT when a dimension is
  // negative or the element count exceeds kMaxTensorElements.
  static absl::StatusOr<Tensor> Zeros(std::vector<int64_t> shape);
  // Wraps `data` (moved in). Returns INVALID_ARGUMENT when the shape is
  // invalid or its element count differs from data.size().
  static absl::StatusOr<Tensor> FromData(std::vector<int64_t> shape,
                                         std::vector<float> data);
  // Number of elements of `shape`; INVALID_ARGUMENT as for Zeros.
  static absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape);

  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // REQUIRES: 0 <= i < rank().
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  absl::Span<const float> data() const { return data_; }
  absl::Span<float> mutable_data() { return absl::MakeSpan(data_); }
  const float* ptr() const { return data_.data(); }
  float* mutable_ptr() { return data_.data(); }
  std::vector<float> release() && { return std::move(data_); }

  // "[2, 3, 4]" for error messages.
  std::string ShapeString() const;

 private:
  Tensor(std::vector<int64_t> shape, std::vector<float> data)
      : shape_(std::move(shape)), data_(std::move(data)) {}
  std::vector<int64_t> shape_;
  std::vector<float> data_;
};

// Returns INVALID_ARGUMENT naming `what` unless t has exactly `rank` dims,
// each positive.
absl::Status CheckRank(const Tensor& t, int rank, const char* what);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_TENSOR_H_
