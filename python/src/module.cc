// The extension module tandem._tandem: the bindings behind the `tandem`
// Python package (python/tandem/*.py wrap them; users import `tandem`).
#include "python/src/common.h"

namespace tandem::python {
void RegisterClient(py::module_& m);    // client_bindings.cc
void RegisterSim(py::module_& m);       // sim_bindings.cc
void RegisterWorker(py::module_& m);    // worker_bindings.cc
void RegisterWorkerKv(py::module_& m);  // worker_kv_bindings.cc
}  // namespace tandem::python

PYBIND11_MODULE(_tandem, m) {
  m.doc() = "tandem's C++ core: client SDK, simulator and worker client bindings";
  tandem::python::RegisterClient(m);
  tandem::python::RegisterSim(m);
  tandem::python::RegisterWorker(m);
  tandem::python::RegisterWorkerKv(m);
}
