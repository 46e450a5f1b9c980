#include "ml/worker/tensor_codec.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "ml/worker/huge_pages.h"

namespace tandem::ml::worker {

static_assert(std::endian::native == std::endian::little,
              "tandem-worker assumes a little-endian host (wire tensors are little endian)");

int DTypeSize(proto::DType dtype) {
  switch (dtype) {
    case proto::DTYPE_FLOAT32:
    case proto::DTYPE_INT32:
      return 4;
    case proto::DTYPE_FLOAT64:
    case proto::DTYPE_INT64:
    case proto::DTYPE_UINT64:
      return 8;
    case proto::DTYPE_UINT8:
      return 1;
    default:
      return 0;
  }
}

absl::string_view DTypeName(proto::DType dtype) {
  switch (dtype) {
    case proto::DTYPE_FLOAT32:
      return "float32";
    case proto::DTYPE_FLOAT64:
      return "float64";
    case proto::DTYPE_INT32:
      return "int32";
    case proto::DTYPE_INT64:
      return "int64";
    case proto::DTYPE_UINT64:
      return "uint64";
    case proto::DTYPE_UINT8:
      return "uint8";
    default:
      return "unspecified";
  }
}

namespace {

// Element count of `t` once its layout is checked against `data_bytes` of
// data: the codes of DecodeTensor.
absl::StatusOr<int64_t> CheckLayout(const proto::Tensor& t, size_t data_bytes, int64_t max_elements,
                                    absl::string_view what) {
  TANDEM_ASSIGN_OR_RETURN(const size_t declared, DeclaredBytes(t, what));
  const int64_t n = static_cast<int64_t>(declared / static_cast<size_t>(DTypeSize(t.dtype())));
  if (n > max_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", n, " elements exceed the cap of ", max_elements));
  }
  if (data_bytes != declared) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape [", absl::StrJoin(t.shape(), ", "), "] of ",
                     DTypeName(t.dtype()), " needs ", declared, " bytes, got ", data_bytes));
  }
  return n;
}

absl::Status CheckFiniteInput(absl::Span<const float> values, absl::string_view what) {
  if (!AllFinite(values))
    return absl::InvalidArgumentError(absl::StrCat(what, ": contains NaN or infinity"));
  return absl::OkStatus();
}

// float32 or float64 wire bytes as a checked float tensor (one copy).
absl::StatusOr<kernels::Tensor> FloatsFrom(std::vector<int64_t> shape, proto::DType dtype,
                                           absl::string_view data, int64_t n,
                                           absl::string_view what) {
  std::vector<float> values = AdvisedFloats(static_cast<size_t>(n));
  if (dtype == proto::DTYPE_FLOAT32) {
    // A zero-size tensor may come with null pointers: memcpy must not see them.
    if (!data.empty()) std::memcpy(values.data(), data.data(), data.size());
  } else {
    for (int64_t i = 0; i < n; ++i) {
      double x;
      std::memcpy(&x, data.data() + 8 * i, 8);
      values[i] = static_cast<float>(x);
    }
  }
  TANDEM_RETURN_IF_ERROR(CheckFiniteInput(values, what));
  return kernels::Tensor::FromData(std::move(shape), std::move(values));
}

bool IsFloat(proto::DType dtype) {
  return dtype == proto::DTYPE_FLOAT32 || dtype == proto::DTYPE_FLOAT64;
}

}  // namespace

absl::StatusOr<size_t> DeclaredBytes(const proto::Tensor& t, absl::string_view what) {
  const int size = DTypeSize(t.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported dtype ", static_cast<int>(t.dtype())));
  }
  if (t.shape_size() > 8) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", t.shape_size(), " > 8"));
  }
  // NumElements bounds the count by kMaxTensorElements (2^31 - 1): times 8
  // bytes it cannot overflow.
  auto n = kernels::Tensor::NumElements(t.shape());
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
  return static_cast<size_t>(*n) * static_cast<size_t>(size);
}

absl::StatusOr<WireTensor> DecodeTensor(const proto::Tensor& t, int64_t max_elements,
                                        absl::string_view what) {
  TANDEM_ASSIGN_OR_RETURN(const int64_t n, CheckLayout(t, t.data().size(), max_elements, what));
  WireTensor out;
  out.name = t.name();
  out.dtype = t.dtype();
  out.shape.assign(t.shape().begin(), t.shape().end());
  if (IsFloat(t.dtype())) {
    TANDEM_ASSIGN_OR_RETURN(out.f32, FloatsFrom(out.shape, t.dtype(), t.data(), n, what));
  } else {
    out.raw = t.data();
  }
  return out;
}

absl::Status TensorBytes::Append(absl::string_view piece) {
  if (piece.size() > declared_ - received_) {
    return absl::InvalidArgumentError(absl::StrCat("data past the declared ", declared_, " bytes (",
                                                   received_, " received, ", piece.size(),
                                                   " more)"));
  }
  if (piece.empty()) return absl::OkStatus();
  if (floats_) {
    if (f32_.empty()) f32_ = AdvisedFloats(declared_ / sizeof(float));
    std::memcpy(reinterpret_cast<char*>(f32_.data()) + received_, piece.data(), piece.size());
  } else {
    ReserveAdvised(&bytes_, declared_);
    bytes_.append(piece.data(), piece.size());
  }
  received_ += piece.size();
  return absl::OkStatus();
}

std::vector<float> TensorBytes::TakeFloats() {
  received_ = 0;
  return std::move(f32_);
}

std::string TensorBytes::TakeString() {
  std::string out;
  if (floats_) {
    out.assign(reinterpret_cast<const char*>(f32_.data()), received_);
    f32_ = {};
  } else {
    out = std::move(bytes_);
  }
  received_ = 0;
  return out;
}

absl::StatusOr<WireTensor> DecodeTensor(const proto::Tensor& t, TensorBytes data,
                                        int64_t max_elements, absl::string_view what) {
  TANDEM_ASSIGN_OR_RETURN(const int64_t n,
                          CheckLayout(t, data.received_bytes(), max_elements, what));
  WireTensor out;
  out.name = t.name();
  out.dtype = t.dtype();
  out.shape.assign(t.shape().begin(), t.shape().end());
  if (data.holds_floats()) {
    std::vector<float> values = data.TakeFloats();
    TANDEM_RETURN_IF_ERROR(CheckFiniteInput(values, what));
    TANDEM_ASSIGN_OR_RETURN(out.f32, kernels::Tensor::FromData(out.shape, std::move(values)));
  } else if (IsFloat(t.dtype())) {
    TANDEM_ASSIGN_OR_RETURN(out.f32, FloatsFrom(out.shape, t.dtype(), data.bytes(), n, what));
  } else {
    out.raw = data.TakeString();
  }
  return out;
}

bool AllFinite(absl::Span<const float> values) {
  // NaN and infinities are the floats whose exponent bits are all set.
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t bad = 0;
  for (float x : values) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

absl::Status CheckFiniteOutput(const proto::Tensor& t, absl::string_view what) {
  if (t.dtype() != proto::DTYPE_FLOAT32) return absl::OkStatus();
  const size_t n = t.data().size() / sizeof(float);
  // The data of a proto string need not be float-aligned for the fast
  // pass; std::string buffers from the allocator are, in practice.
  if (reinterpret_cast<uintptr_t>(t.data().data()) % alignof(float) == 0 &&
      AllFinite(absl::MakeConstSpan(reinterpret_cast<const float*>(t.data().data()), n))) {
    return absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, t.data().data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(x)) {
      return absl::OutOfRangeError(
          absl::StrCat(what, " holds NaN or infinity at index ", i,
                       ": the inputs overflow float32 in this kernel; scale them down"));
    }
  }
  return absl::OkStatus();
}

proto::Tensor EncodeFloat(absl::string_view name, const kernels::Tensor& t) {
  proto::Tensor p;
  p.set_name(std::string(name));
  p.set_dtype(proto::DTYPE_FLOAT32);
  for (int64_t d : t.shape()) p.add_shape(d);
  const size_t bytes = static_cast<size_t>(t.size()) * sizeof(float);
  ReserveAdvised(p.mutable_data(), bytes);
  p.mutable_data()->append(reinterpret_cast<const char*>(t.ptr()), bytes);
  return p;
}

proto::Tensor EncodeInt64(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int64_t>& values) {
  proto::Tensor p;
  p.set_name(std::string(name));
  p.set_dtype(proto::DTYPE_INT64);
  for (int64_t d : shape) p.add_shape(d);
  p.set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  return p;
}

proto::Tensor EncodeInt32(absl::string_view name, std::vector<int64_t> shape,
                          const std::vector<int32_t>& values) {
  proto::Tensor p;
  p.set_name(std::string(name));
  p.set_dtype(proto::DTYPE_INT32);
  for (int64_t d : shape) p.add_shape(d);
  p.set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
  return p;
}

proto::Tensor EncodeBytes(absl::string_view name, std::vector<int64_t> shape, std::string bytes) {
  proto::Tensor p;
  p.set_name(std::string(name));
  p.set_dtype(proto::DTYPE_UINT8);
  for (int64_t d : shape) p.add_shape(d);
  p.set_data(std::move(bytes));
  return p;
}

absl::StatusOr<kernels::Tensor> ToFloatTensor(const proto::Tensor& t) {
  if (t.dtype() != proto::DTYPE_FLOAT32) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name(), "' is ", DTypeName(t.dtype()), ", not float32"));
  }
  auto w = DecodeTensor(t, kernels::kMaxTensorElements, t.name());
  if (!w.ok()) return w.status();
  return std::move(w->f32);
}

}  // namespace tandem::ml::worker
