// proto::Tensor <-> in-memory buffers for tandem-worker. Every wire tensor
// passes DecodeTensor before any kernel sees it: dtype known, dimensions
// non-negative, element count within the cap, and
// product(shape) * sizeof(dtype) == len(data); else INVALID_ARGUMENT.
// Keep in sync with proto/common.proto (DType). Host byte order must be
// little endian (checked at compile time). Thread-safe (pure functions).
#ifndef TANDEM_ML_WORKER_TENSOR_CODEC_H_
#define TANDEM_ML_WORKER_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ml/kernels/tensor.h"
#include "proto/common.pb.h"

namespace tandem::ml::worker {

// A validated wire tensor. For DTYPE_FLOAT32 (and FLOAT64, converted to
// float) `f32` holds the values; for every other dtype `raw` holds the
// little-endian bytes.
struct WireTensor {
  std::string name;
  proto::DType dtype = proto::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  kernels::Tensor f32;
  std::string raw;
};

// Size in bytes of one element, 0 for DTYPE_UNSPECIFIED or unknown values.
int DTypeSize(proto::DType dtype);
// "float32", "int64", ...
absl::string_view DTypeName(proto::DType dtype);

// Returns INVALID_ARGUMENT as described in the header comment, naming
// `what` (e.g. "input 2 (q)"), when max_elements is exceeded, or when a
// float value is NaN or infinite.
absl::StatusOr<WireTensor> DecodeTensor(const proto::Tensor& t, int64_t max_elements,
                                        absl::string_view what);

proto::Tensor EncodeFloat(absl::string_view name, const kernels::Tensor& t);
proto::Tensor EncodeInt64(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int64_t>& values);
proto::Tensor EncodeInt32(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int32_t>& values);
// Raw bytes as DTYPE_UINT8 (shape must describe bytes.size() elements).
proto::Tensor EncodeBytes(absl::string_view name, std::vector<int64_t> shape, std::string bytes);

// OK when every value of a DTYPE_FLOAT32 tensor is finite (other dtypes:
// always OK); else OUT_OF_RANGE naming `what` and the first bad index. The
// worker runs it on every kernel output: valid, finite inputs can still
// overflow float32 inside a kernel (e.g. 1e30-scaled attention inputs), and a
// caller must not receive NaN as an answer.
absl::Status CheckFiniteOutput(const proto::Tensor& t, absl::string_view what);

// Decodes a DTYPE_FLOAT32 proto tensor into a kernels::Tensor (test and
// client helper). INVALID_ARGUMENT on any mismatch.
absl::StatusOr<kernels::Tensor> ToFloatTensor(const proto::Tensor& t);

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_TENSOR_CODEC_H_
