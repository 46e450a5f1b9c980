// The KV cache RPCs of tandem-worker (proto/worker.proto: CreateKvCache,
// AppendKvCache, DropKvCache, ListKvCaches) for tandem.worker.Client
// (python/tandem/worker.py), which holds one _WorkerKvClient beside its
// _WorkerClient, both on one _WorkerChannel (worker_channel.h). Kernels
// naming a cache go through _WorkerClient.run (cache_name).
//
// Appends: keys and values float32/float64 arrays (heads, n, head_dim),
// codes a uint8 array (heads, n, code_bits / 8) (TypeError for other
// dtypes, ValueError for NaN/Inf, before anything is sent), streamed in
// chunks of at most 1 MiB read straight from the arrays with the GIL
// released. The worker's refusals raise the tandem.Error of their code.
// Thread safety: as _WorkerClient (concurrent calls; close() not racing one).
#include <grpcpp/grpcpp.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "python/src/common.h"
#include "python/src/worker_channel.h"

namespace tandem::python {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

py::dict InfoDict(const proto::KvCacheInfo& i) {
  py::dict d;
  d["name"] = i.spec().name();
  d["heads"] = i.spec().heads();
  d["head_dim"] = i.spec().head_dim();
  d["code_bits"] = i.spec().code_bits();
  d["tokens"] = i.tokens();
  d["capacity_tokens"] = i.capacity_tokens();
  d["bytes"] = i.bytes();
  d["backend"] = i.backend();
  return d;
}

// `obj` as a C-contiguous array of a wire dtype the append takes; its
// layout (name, dtype, shape) goes into `t`.
py::array AppendArray(py::handle obj, const char* name, bool codes, proto::Tensor* t) {
  py::module_ np = py::module_::import("numpy");
  py::array a = np.attr("ascontiguousarray")(np.attr("asarray")(obj));
  const py::dtype dt = a.dtype();
  if (codes) {
    if (!dt.is(py::dtype::of<uint8_t>())) throw py::type_error("codes must be a uint8 array");
    t->set_dtype(proto::DTYPE_UINT8);
  } else {
    const bool f32 = dt.is(py::dtype::of<float>());
    if (!f32 && !dt.is(py::dtype::of<double>())) {
      throw py::type_error(absl::StrCat(name, " must be a float32 or float64 array"));
    }
    t->set_dtype(f32 ? proto::DTYPE_FLOAT32 : proto::DTYPE_FLOAT64);
    if (!np.attr("isfinite")(a).attr("all")().cast<bool>())
      throw py::value_error(absl::StrCat(name, " holds NaN or infinite values"));
  }
  t->set_name(name);
  for (py::ssize_t d = 0; d < a.ndim(); ++d) t->add_shape(a.shape(d));
  return a;
}

class PyWorkerKvClient {
 public:
  // Calls through `channel`, the one its _WorkerClient uses.
  explicit PyWorkerKvClient(std::shared_ptr<WorkerChannel> channel) : channel_(std::move(channel)) {
    if (channel_ == nullptr) throw py::value_error("a worker client needs a channel");
  }

  py::dict Create(const std::string& name, int heads, int head_dim, int code_bits, bool replace) {
    proto::CreateKvCacheRequest req;
    proto::KvCacheSpec* spec = req.mutable_spec();
    spec->set_name(name);
    spec->set_heads(heads);
    spec->set_head_dim(head_dim);
    spec->set_code_bits(code_bits);
    spec->set_dtype(proto::DTYPE_FLOAT32);
    spec->set_replace(replace);
    proto::KvCacheInfo info;
    channel_->Call(
        [&](grpc::ClientContext* ctx) { return channel_->stub()->CreateKvCache(ctx, req, &info); });
    return InfoDict(info);
  }

  py::dict Append(const std::string& name, py::handle keys, py::handle values, py::handle codes) {
    proto::KvCacheAppend header;
    header.set_name(name);
    std::vector<py::array> arrays;  // kept alive while their bytes are sent
    arrays.push_back(AppendArray(keys, "keys", false, header.add_tensors()));
    arrays.push_back(AppendArray(values, "values", false, header.add_tensors()));
    if (!codes.is_none()) arrays.push_back(AppendArray(codes, "codes", true, header.add_tensors()));
    std::vector<absl::string_view> data;
    for (const py::array& a : arrays) {
      data.emplace_back(static_cast<const char*>(a.data()), static_cast<size_t>(a.nbytes()));
    }
    channel_->CheckOpen();
    proto::KvCacheInfo info;
    grpc::Status s;
    {
      py::gil_scoped_release release;
      grpc::ClientContext ctx;
      channel_->SetDeadline(&ctx);
      auto writer = channel_->stub()->AppendKvCache(&ctx, &info);
      // A failed write: the worker answered early (e.g. over budget); Finish says why.
      ml::worker::WriteKvAppendChunks(
          header, data, kChunkBytes,
          [&](const proto::KvCacheAppendChunk& c) { return writer->Write(c); });
      writer->WritesDone();
      s = writer->Finish();
    }
    OkOrThrow(FromGrpcStatus(s));
    return InfoDict(info);
  }

  int64_t Drop(const std::string& name) {
    proto::DropKvCacheRequest req;
    req.set_name(name);
    proto::DropKvCacheResponse r;
    channel_->Call(
        [&](grpc::ClientContext* ctx) { return channel_->stub()->DropKvCache(ctx, req, &r); });
    return r.freed_bytes();
  }

  py::dict List() {
    proto::ListKvCachesResponse r;
    channel_->Call(
        [&](grpc::ClientContext* ctx) { return channel_->stub()->ListKvCaches(ctx, {}, &r); });
    py::list caches;
    for (const proto::KvCacheInfo& i : r.caches()) caches.append(InfoDict(i));
    py::dict d;
    d["caches"] = caches;
    d["used_bytes"] = r.used_bytes();
    d["max_bytes"] = r.max_bytes();
    d["backend"] = r.backend();
    return d;
  }

 private:
  std::shared_ptr<WorkerChannel> channel_;
};

}  // namespace

void RegisterWorkerKv(py::module_& m) {
  py::class_<PyWorkerKvClient>(m, "_WorkerKvClient")
      .def(py::init<std::shared_ptr<WorkerChannel>>(), py::arg("channel"))
      .def("create", &PyWorkerKvClient::Create, py::arg("name"), py::arg("heads"),
           py::arg("head_dim"), py::arg("code_bits"), py::arg("replace"))
      .def("append", &PyWorkerKvClient::Append, py::arg("name"), py::arg("keys"), py::arg("values"),
           py::arg("codes"))
      .def("drop", &PyWorkerKvClient::Drop, py::arg("name"))
      .def("list", &PyWorkerKvClient::List);
}

}  // namespace tandem::python
