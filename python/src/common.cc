#include "python/src/common.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::python {

void ThrowStatus(const absl::Status& status) {
  // tandem._errors.from_status(code, message) -> the exception instance.
  py::object exc =
      py::module_::import("tandem._errors")
          .attr("from_status")(static_cast<int>(status.code()), std::string(status.message()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

py::array AsFloatArray(py::handle obj, const std::string& what) {
  py::array a;
  if (py::isinstance<py::array>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    try {
      a = py::module_::import("numpy").attr("asarray")(obj);
    } catch (py::error_already_set&) {
      throw py::type_error(absl::StrCat(what, ": expected a float32 or float64 array, got ",
                                        std::string(py::str(py::type::handle_of(obj)))));
    }
  }
  const py::dtype dt = a.dtype();
  if (!dt.is(py::dtype::of<float>()) && !dt.is(py::dtype::of<double>()) &&
      !(dt.kind() == 'f' && (dt.itemsize() == 4 || dt.itemsize() == 8))) {
    throw py::type_error(absl::StrCat(what, ": expected dtype float32 or float64, got ",
                                      std::string(py::str(py::handle(dt)))));
  }
  return a;
}

std::vector<int64_t> ShapeOf(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

void AppendFloats(const py::array& a, const std::string& what, bool check_finite,
                  std::vector<float>* out) {
  // Contiguous float32 (a view when it already is, else converted).
  auto f = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!f) throw py::error_already_set();
  const size_t n = static_cast<size_t>(f.size());
  const float* data = f.data();
  if (check_finite) {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(data[i])) {
        throw py::value_error(absl::StrCat(what, ": value ", i, " is ",
                                           std::isnan(data[i]) ? "NaN" : "infinite",
                                           " (updates must be finite)"));
      }
    }
  }
  const size_t start = out->size();
  out->resize(start + n);
  if (n > 0) std::memcpy(out->data() + start, data, n * sizeof(float));
}

std::vector<float> FlattenUpdate(py::handle update, const std::vector<TensorShape>& tensors,
                                 bool check_finite, const std::string& what) {
  int64_t total = 0;
  for (const TensorShape& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    total += n;
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(total));
  if (py::isinstance<py::list>(update) || py::isinstance<py::tuple>(update)) {
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(update);
    if (seq.size() != tensors.size()) {
      throw py::value_error(absl::StrCat(what, ": expected ", tensors.size(),
                                         " arrays (one per tensor), got ", seq.size()));
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string name = absl::StrCat(what, "[", i, "] (", tensors[i].name, ")");
      py::object item = seq[i];
      py::array a = AsFloatArray(item, name);
      if (ShapeOf(a) != tensors[i].shape) {
        throw py::value_error(absl::StrCat(name, ": expected shape ", ShapeString(tensors[i].shape),
                                           ", got ", ShapeString(ShapeOf(a))));
      }
      AppendFloats(a, name, check_finite, &out);
    }
    return out;
  }
  if (py::isinstance<py::dict>(update)) {
    throw py::type_error(absl::StrCat(what,
                                      ": expected a list of arrays (tensor order) or one "
                                      "flat array, got a dict"));
  }
  py::array a = AsFloatArray(update, what);
  if (a.ndim() != 1 || a.size() != total) {
    throw py::value_error(absl::StrCat(what, ": a single array must be flat with ", total,
                                       " values (the model's parameters), got shape ",
                                       ShapeString(ShapeOf(a))));
  }
  AppendFloats(a, what, check_finite, &out);
  return out;
}

py::array_t<float> ToArray(absl::Span<const float> values, const std::vector<int64_t>& shape) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array_t<float> out(dims);
  if (!values.empty())
    std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
  return out;
}

py::list SplitToArrays(absl::Span<const float> values, const std::vector<TensorShape>& tensors) {
  py::list out;
  size_t offset = 0;
  for (const TensorShape& t : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    if (offset + n > values.size()) throw py::value_error("tensors exceed the model's values");
    out.append(ToArray(values.subspan(offset, n), t.shape));
    offset += n;
  }
  return out;
}

}  // namespace tandem::python
