// proto::Tensor <-> in-memory buffers for tandem-worker. Every wire tensor
// passes DecodeTensor before any kernel sees it: dtype known, dimensions
// non-negative, element count within the cap, and
// product(shape) * sizeof(dtype) == len(data); else INVALID_ARGUMENT.
// Keep in sync with proto/common.proto (DType). Host byte order must be
// little endian (checked at compile time). Thread-safe (pure functions;
// TensorBytes objects are not, each has one owner).
#ifndef TANDEM_ML_WORKER_TENSOR_CODEC_H_
#define TANDEM_ML_WORKER_TENSOR_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
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

// Byte size that `t`'s shape and dtype declare (its data is ignored):
// INVALID_ARGUMENT naming `what` for an unsupported dtype, a rank above 8, a
// negative dimension or more than kernels::kMaxTensorElements elements.
absl::StatusOr<size_t> DeclaredBytes(const proto::Tensor& t, absl::string_view what);

// The data of one tensor arriving in pieces (RunStream, LoadModel), written
// in place into one buffer of the declared size, allocated by the first
// non-empty piece (never larger than declared, so the declared size bounds
// the memory). With float storage a DTYPE_FLOAT32 tensor lands in a
// std::vector<float>, which DecodeTensor below moves into the kernels'
// tensor without a copy; otherwise the bytes land in a std::string.
// Movable, not copyable; not thread-safe.
class TensorBytes {
 public:
  TensorBytes() = default;
  TensorBytes(proto::DType dtype, size_t declared_bytes, bool float_storage)
      : declared_(declared_bytes), floats_(float_storage && dtype == proto::DTYPE_FLOAT32) {}
  TensorBytes(TensorBytes&&) = default;
  TensorBytes& operator=(TensorBytes&&) = default;

  // Appends `piece`; INVALID_ARGUMENT (nothing appended) when it would pass
  // the declared size.
  absl::Status Append(absl::string_view piece);

  size_t declared_bytes() const { return declared_; }
  size_t received_bytes() const { return received_; }
  bool complete() const { return received_ == declared_; }
  bool holds_floats() const { return floats_; }
  // The bytes received so far (string storage only).
  absl::string_view bytes() const { return bytes_; }
  // Move the data out, leaving the object empty. TakeFloats REQUIRES
  // holds_floats() and complete(); TakeString returns the bytes received
  // (float storage: copied out).
  std::vector<float> TakeFloats();
  std::string TakeString();

 private:
  size_t declared_ = 0;
  size_t received_ = 0;
  bool floats_ = false;
  std::vector<float> f32_;
  std::string bytes_;
};

// DecodeTensor for streamed data: `t` gives the name, shape and dtype (its
// data is ignored), `data` the bytes. Same checks and codes; float32 data
// held as floats is moved, not copied.
absl::StatusOr<WireTensor> DecodeTensor(const proto::Tensor& t, TensorBytes data,
                                        int64_t max_elements, absl::string_view what);

proto::Tensor EncodeFloat(absl::string_view name, const kernels::Tensor& t);
proto::Tensor EncodeInt64(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int64_t>& values);
proto::Tensor EncodeInt32(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int32_t>& values);
// Raw bytes as DTYPE_UINT8 (shape must describe bytes.size() elements).
proto::Tensor EncodeBytes(absl::string_view name, std::vector<int64_t> shape, std::string bytes);

// True when no value is NaN or infinite: one branch-free pass over the
// bits (vectorises), for the large tensors every stream checks.
bool AllFinite(absl::Span<const float> values);

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
