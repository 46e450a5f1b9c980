// Shared by the bindings of the `tandem` Python package: statuses as Python
// exceptions, and NumPy input checked before any C++ sees it.
//
// Errors: a non-OK absl::Status raises the tandem.Error subclass of its code
// (python/tandem/_errors.py; INVALID_ARGUMENT is also a ValueError), whose
// `.code` is the status code. Input that is not a float array raises
// TypeError, a wrong shape or a NaN/Inf ValueError, each naming the input.
// Every function here needs the GIL (they touch Python objects); the
// callers release it around the C++ work only.
#ifndef TANDEM_PYTHON_SRC_COMMON_H_
#define TANDEM_PYTHON_SRC_COMMON_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::python {

namespace py = pybind11;

// Raises the tandem.Error subclass of `status` (which must not be OK).
[[noreturn]] void ThrowStatus(const absl::Status& status);

inline void OkOrThrow(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}
template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

// `obj` as a NumPy array (numpy.asarray: lists, torch CPU tensors and other
// array-likes convert). TypeError when it does not convert or its dtype is
// not float32 or float64.
py::array AsFloatArray(py::handle obj, const std::string& what);

// "(2, 3)" for messages.
std::string ShapeString(const std::vector<int64_t>& shape);
std::vector<int64_t> ShapeOf(const py::array& a);

// Appends the values of a float32/float64 array (any layout) to `out` as
// float32. With `check_finite`, ValueError naming `what` and the flat index
// of the first NaN or infinity.
void AppendFloats(const py::array& a, const std::string& what, bool check_finite,
                  std::vector<float>* out);

// One tensor an update must supply.
struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
};

// A model-sized update: a list/tuple of arrays, one per tensor with exactly
// its shape, or one flat array of the total size. Returns the float32
// concatenation. TypeError for another container or dtype, ValueError for
// a wrong count, shape or (with check_finite) a non-finite value.
std::vector<float> FlattenUpdate(py::handle update, const std::vector<TensorShape>& tensors,
                                 bool check_finite, const std::string& what = "update");

// A fresh float32 array of `shape` holding a copy of `values`.
py::array_t<float> ToArray(absl::Span<const float> values, const std::vector<int64_t>& shape);

// Splits flat `values` into one fresh array per tensor (list).
py::list SplitToArrays(absl::Span<const float> values, const std::vector<TensorShape>& tensors);

}  // namespace tandem::python

#endif  // TANDEM_PYTHON_SRC_COMMON_H_
