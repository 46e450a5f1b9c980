#include "ml/worker/tensor_codec.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

absl::StatusOr<WireTensor> DecodeTensor(const proto::Tensor& t, int64_t max_elements,
                                        absl::string_view what) {
  const int size = DTypeSize(t.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported dtype ", static_cast<int>(t.dtype())));
  }
  if (t.shape_size() > 8) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", t.shape_size(), " > 8"));
  }
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  auto n = kernels::Tensor::NumElements(shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
  if (*n > max_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", *n, " elements exceed the cap of ", max_elements));
  }
  if (static_cast<int64_t>(t.data().size()) != *n * size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(shape, ", "),
                                                   "] of ", DTypeName(t.dtype()), " needs ",
                                                   *n * size, " bytes, got ", t.data().size()));
  }
  WireTensor out;
  out.name = t.name();
  out.dtype = t.dtype();
  out.shape = shape;
  if (t.dtype() == proto::DTYPE_FLOAT32 || t.dtype() == proto::DTYPE_FLOAT64) {
    std::vector<float> values(static_cast<size_t>(*n));
    if (t.dtype() == proto::DTYPE_FLOAT32) {
      std::memcpy(values.data(), t.data().data(), t.data().size());
    } else {
      for (int64_t i = 0; i < *n; ++i) {
        double x;
        std::memcpy(&x, t.data().data() + 8 * i, 8);
        values[i] = static_cast<float>(x);
      }
    }
    for (float x : values) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": contains NaN or infinity"));
      }
    }
    auto f = kernels::Tensor::FromData(std::move(shape), std::move(values));
    if (!f.ok()) return f.status();
    out.f32 = *std::move(f);
  } else {
    out.raw = t.data();
  }
  return out;
}

absl::Status CheckFiniteOutput(const proto::Tensor& t, absl::string_view what) {
  if (t.dtype() != proto::DTYPE_FLOAT32) return absl::OkStatus();
  const size_t n = t.data().size() / sizeof(float);
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
  p.set_data(reinterpret_cast<const char*>(t.ptr()), t.size() * sizeof(float));
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
