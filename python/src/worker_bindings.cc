// tandem.worker.Client (python/tandem/worker.py): any kernel of a running
// tandem-worker (proto/worker.proto) called with NumPy arrays.
//
// Inputs: NumPy arrays (or array-likes) of float32, float64, int32, int64,
// uint64 or uint8, sent as they are (the worker checks them against the
// kernel's signature: INVALID_ARGUMENT -> tandem.InvalidArgumentError);
// other dtypes raise TypeError, NaN/Inf in a float input ValueError before
// anything is sent. Requests above 32 MiB go through RunStream in chunks.
// Models (LoadModel / ReadModel / UnloadModel / ListModels): tensors are
// float32/float64 arrays (TypeError otherwise, ValueError for NaN/Inf before
// anything is sent), streamed in chunks of at most 1 MiB; the worker's
// refusals raise the tandem.Error of their code (NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED, INVALID_ARGUMENT, PERMISSION_DENIED).
// GIL: released during the RPC (and the kernel's run on the worker).
// Thread safety: a Client may be used from several threads at once (gRPC
// stubs are thread-safe), except close(), which must not race a call.
#include <grpcpp/grpcpp.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "python/src/common.h"
#include "python/src/worker_channel.h"

namespace tandem::python {
namespace {

constexpr size_t kStreamAbove = size_t{32} << 20;  // request bytes sent with RunStream
constexpr size_t kChunkBytes = size_t{4} << 20;
constexpr size_t kMaxStreamBytes = size_t{1} << 30;
constexpr size_t kModelChunkBytes = size_t{1} << 20;  // LoadModel data per chunk

struct DTypeInfo {
  proto::DType dtype;
  py::dtype numpy;
};

DTypeInfo DTypeOf(const py::array& a, const std::string& what) {
  const py::dtype dt = a.dtype();
  if (dt.is(py::dtype::of<float>())) return {proto::DTYPE_FLOAT32, dt};
  if (dt.is(py::dtype::of<double>())) return {proto::DTYPE_FLOAT64, dt};
  if (dt.is(py::dtype::of<int32_t>())) return {proto::DTYPE_INT32, dt};
  if (dt.is(py::dtype::of<int64_t>())) return {proto::DTYPE_INT64, dt};
  if (dt.is(py::dtype::of<uint64_t>())) return {proto::DTYPE_UINT64, dt};
  if (dt.is(py::dtype::of<uint8_t>())) return {proto::DTYPE_UINT8, dt};
  throw py::type_error(absl::StrCat(what, ": dtype ", std::string(py::str(py::handle(dt))),
                                    " is not one the worker takes (float32, float64, int32, "
                                    "int64, uint64, uint8)"));
}

template <typename T>
void CheckFinite(const py::array& a, const std::string& what) {
  const T* p = static_cast<const T*>(a.data());
  for (py::ssize_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(p[i])) {
      throw py::value_error(absl::StrCat(what, ": value ", i, " is NaN or infinite"));
    }
  }
}

proto::Tensor EncodeInput(py::handle obj, const std::string& name, const std::string& what) {
  py::array a = py::module_::import("numpy").attr("asarray")(obj);
  const DTypeInfo info = DTypeOf(a, what);
  // Little-endian, C order (the wire format).
  a = py::module_::import("numpy").attr("ascontiguousarray")(a);
  if (info.dtype == proto::DTYPE_FLOAT32) CheckFinite<float>(a, what);
  if (info.dtype == proto::DTYPE_FLOAT64) CheckFinite<double>(a, what);
  proto::Tensor t;
  t.set_name(name);
  t.set_dtype(info.dtype);
  for (py::ssize_t d = 0; d < a.ndim(); ++d) t.add_shape(a.shape(d));
  t.set_data(static_cast<const char*>(a.data()), static_cast<size_t>(a.nbytes()));
  return t;
}

py::array DecodeOutput(const proto::Tensor& t) {
  py::dtype dt;
  size_t item = 0;
  switch (t.dtype()) {
    case proto::DTYPE_FLOAT32:
      dt = py::dtype::of<float>();
      item = 4;
      break;
    case proto::DTYPE_FLOAT64:
      dt = py::dtype::of<double>();
      item = 8;
      break;
    case proto::DTYPE_INT32:
      dt = py::dtype::of<int32_t>();
      item = 4;
      break;
    case proto::DTYPE_INT64:
      dt = py::dtype::of<int64_t>();
      item = 8;
      break;
    case proto::DTYPE_UINT64:
      dt = py::dtype::of<uint64_t>();
      item = 8;
      break;
    case proto::DTYPE_UINT8:
      dt = py::dtype::of<uint8_t>();
      item = 1;
      break;
    default:
      ThrowStatus(
          absl::DataLossError(absl::StrCat("worker output '", t.name(), "' has an unknown dtype")));
  }
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  size_t n = 1;
  for (py::ssize_t d : shape) {
    if (d < 0) ThrowStatus(absl::DataLossError("worker output with a negative dimension"));
    n *= static_cast<size_t>(d);
  }
  if (n * item != t.data().size()) {
    ThrowStatus(absl::DataLossError(
        absl::StrCat("worker output '", t.name(), "': shape and data size disagree")));
  }
  py::array out(dt, shape);
  if (n > 0) std::memcpy(out.mutable_data(), t.data().data(), t.data().size());
  return out;
}

class PyWorkerClient {
 public:
  // Calls through `channel` (shared with the KV cache client; closed by
  // WorkerChannel::Close).
  explicit PyWorkerClient(std::shared_ptr<WorkerChannel> channel) : channel_(std::move(channel)) {
    if (channel_ == nullptr) throw py::value_error("a worker client needs a channel");
  }

  py::dict Health() {
    proto::HealthResponse r;
    Call([&](grpc::ClientContext* ctx) { return channel_->stub()->Health(ctx, {}, &r); });
    py::dict d;
    d["serving"] = r.serving();
    d["backend"] = r.backend();
    return d;
  }

  py::list Capabilities() {
    proto::CapabilitiesResponse r;
    Call([&](grpc::ClientContext* ctx) { return channel_->stub()->Capabilities(ctx, {}, &r); });
    auto signature = [](const google::protobuf::RepeatedPtrField<proto::TensorSignature>& s) {
      py::list out;
      for (const proto::TensorSignature& t : s) {
        py::dict d;
        d["name"] = t.name();
        d["dtype"] = absl::AsciiStrToLower(proto::DType_Name(t.dtype()).substr(6));
        d["rank"] = t.rank();
        d["from_model"] = t.from_model();
        if (t.from_model()) d["model_tensor"] = t.model_tensor();
        d["from_cache"] = t.from_cache();
        out.append(d);
      }
      return out;
    };
    py::list out;
    for (const proto::KernelInfo& k : r.kernels()) {
      py::dict d;
      d["name"] = k.name();
      d["backends"] = std::vector<std::string>(k.backends().begin(), k.backends().end());
      d["inputs"] = signature(k.inputs());
      d["params"] = std::vector<std::string>(k.params().begin(), k.params().end());
      d["outputs"] = signature(k.outputs());
      d["description"] = k.description();
      d["model_kinds"] = std::vector<std::string>(k.model_kinds().begin(), k.model_kinds().end());
      d["model_required"] = k.model_required();
      d["trains_model"] = k.trains_model();
      d["accepts_kv_cache"] = k.accepts_kv_cache();
      out.append(d);
    }
    return out;
  }

  // model_name "" = no model; model_version 0 = the one held now.
  // cache_name "" = no KV cache (cache_head, cache_tokens: KvCacheRef).
  py::tuple Run(const std::string& kernel, py::handle inputs,
                const std::map<std::string, double>& params, const std::string& backend,
                const std::string& model_name, uint64_t model_version,
                const std::string& cache_name, int cache_head, int64_t cache_tokens) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    req.set_backend(backend);
    if (!cache_name.empty()) {
      req.mutable_kv_cache()->set_name(cache_name);
      req.mutable_kv_cache()->set_head(cache_head);
      req.mutable_kv_cache()->set_tokens(cache_tokens);
    }
    if (!model_name.empty()) {
      req.mutable_model()->set_name(model_name);
      req.mutable_model()->set_version(model_version);
    }
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    if (py::isinstance<py::dict>(inputs)) {
      for (auto [k, v] : py::reinterpret_borrow<py::dict>(inputs)) {
        const std::string name = py::str(k);
        *req.add_inputs() = EncodeInput(v, name, absl::StrCat("input '", name, "'"));
      }
    } else if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
      const py::sequence seq = py::reinterpret_borrow<py::sequence>(inputs);
      for (size_t i = 0; i < seq.size(); ++i) {
        py::object item = seq[i];
        *req.add_inputs() = EncodeInput(item, "", absl::StrCat("input ", i));
      }
    } else {
      throw py::type_error("inputs must be a list of arrays (kernel order) or a dict name->array");
    }
    proto::KernelResponse resp;
    CheckOpen();
    if (req.ByteSizeLong() <= kStreamAbove) {
      Call([&](grpc::ClientContext* ctx) { return channel_->stub()->Run(ctx, req, &resp); });
    } else {
      absl::StatusOr<proto::KernelResponse> r;
      {
        py::gil_scoped_release release;
        r = RunStream(req);
      }
      resp = ValueOrThrow(std::move(r));
    }
    py::list outputs;
    for (const proto::Tensor& t : resp.outputs()) outputs.append(DecodeOutput(t));
    py::object version = py::none();
    if (resp.has_model()) version = py::int_(resp.model().version());
    return py::make_tuple(outputs, resp.backend(), resp.elapsed_us(), version);
  }

  // LoadModel: the header (tensors' names, shapes, dtypes) first, then each
  // tensor's bytes in chunks of at most kModelChunkBytes, read straight
  // from the (contiguous) arrays with the GIL released.
  py::dict LoadModel(const std::string& name, const std::string& kind, py::handle tensors,
                     const std::map<std::string, int64_t>& config, uint64_t version, bool replace,
                     const std::string& checkpoint_path) {
    proto::WorkerModelChunk first;
    proto::ModelHeader* h = first.mutable_header();
    h->set_name(name);
    h->set_kind(kind);
    h->set_version(version);
    h->set_replace(replace);
    h->set_checkpoint_path(checkpoint_path);
    for (const auto& [k, v] : config) (*h->mutable_config())[k] = v;
    std::vector<py::array> arrays;  // kept alive while their bytes are sent
    if (!tensors.is_none()) {
      if (!py::isinstance<py::dict>(tensors)) {
        throw py::type_error("tensors must be a dict name -> float32/float64 array");
      }
      for (auto [k, v] : py::reinterpret_borrow<py::dict>(tensors)) {
        const std::string tname = py::str(k);
        const std::string what = absl::StrCat("model tensor '", tname, "'");
        py::array a = py::module_::import("numpy").attr("asarray")(v);
        const bool f32 = a.dtype().is(py::dtype::of<float>());
        if (!f32 && !a.dtype().is(py::dtype::of<double>())) {
          throw py::type_error(absl::StrCat(what, ": dtype ",
                                            std::string(py::str(py::handle(a.dtype()))),
                                            " is not float32 or float64"));
        }
        const DTypeInfo info{f32 ? proto::DTYPE_FLOAT32 : proto::DTYPE_FLOAT64, a.dtype()};
        a = py::module_::import("numpy").attr("ascontiguousarray")(a);
        if (info.dtype == proto::DTYPE_FLOAT32) CheckFinite<float>(a, what);
        if (info.dtype == proto::DTYPE_FLOAT64) CheckFinite<double>(a, what);
        proto::Tensor* t = h->add_tensors();
        t->set_name(tname);
        t->set_dtype(info.dtype);
        for (py::ssize_t d = 0; d < a.ndim(); ++d) t->add_shape(a.shape(d));
        arrays.push_back(std::move(a));
      }
    }
    std::vector<std::pair<const char*, size_t>> data;
    for (const py::array& a : arrays) {
      data.emplace_back(static_cast<const char*>(a.data()), static_cast<size_t>(a.nbytes()));
    }
    CheckOpen();
    proto::ModelInfo info;
    grpc::Status s;
    {
      py::gil_scoped_release release;
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      auto writer = channel_->stub()->LoadModel(&ctx, &info);
      // A failed write: the worker answered early (e.g. over budget); Finish says why.
      bool open = writer->Write(first);
      for (size_t i = 0; open && i < data.size(); ++i) {
        for (size_t off = 0; open && off < data[i].second; off += kModelChunkBytes) {
          proto::WorkerModelChunk c;
          c.set_tensor_index(static_cast<uint32_t>(i));
          c.set_data(data[i].first + off, std::min(kModelChunkBytes, data[i].second - off));
          open = writer->Write(c);
        }
      }
      writer->WritesDone();
      s = writer->Finish();
    }
    OkOrThrow(FromGrpcStatus(s));
    return InfoDict(info);
  }

  // ReadModel: (header dict, dict name -> float32 array).
  py::tuple ReadModel(const std::string& name, uint64_t version) {
    CheckOpen();
    proto::ReadModelRequest req;
    req.mutable_model()->set_name(name);
    req.mutable_model()->set_version(version);
    absl::StatusOr<proto::ModelHeader> r;
    {
      py::gil_scoped_release release;
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      auto reader = channel_->stub()->ReadModel(&ctx, req);
      ml::worker::ModelAssembler assembler(kMaxStreamBytes);
      proto::WorkerModelChunk chunk;
      absl::Status add = absl::OkStatus();
      while (reader->Read(&chunk)) {
        if (add.ok()) add = assembler.Add(std::move(chunk));
        chunk.Clear();
      }
      const grpc::Status s = reader->Finish();
      if (!s.ok()) {
        r = FromGrpcStatus(s);
      } else if (!add.ok()) {
        r = absl::DataLossError(absl::StrCat("malformed ReadModel stream: ", add.message()));
      } else {
        r = assembler.Finish();
      }
    }
    proto::ModelHeader h = ValueOrThrow(std::move(r));
    py::dict header;
    header["name"] = h.name();
    header["version"] = h.version();
    header["kind"] = h.kind();
    header["config"] = ConfigDict(h.config());
    header["tensors"] = Layout(h.tensors());
    py::dict tensors;
    for (proto::Tensor& t : *h.mutable_tensors()) {
      py::array a = DecodeOutput(t);
      if (!a.dtype().is(py::dtype::of<float>())) a = a.attr("astype")("float32");
      tensors[py::str(t.name())] = a;
      t.clear_data();  // one tensor's copy at a time
    }
    return py::make_tuple(header, tensors);
  }

  int64_t UnloadModel(const std::string& name, uint64_t version) {
    proto::UnloadModelRequest req;
    req.mutable_model()->set_name(name);
    req.mutable_model()->set_version(version);
    proto::UnloadModelResponse r;
    Call([&](grpc::ClientContext* ctx) { return channel_->stub()->UnloadModel(ctx, req, &r); });
    return r.freed_bytes();
  }

  py::dict ListModels() {
    proto::ListModelsResponse r;
    Call([&](grpc::ClientContext* ctx) { return channel_->stub()->ListModels(ctx, {}, &r); });
    py::list models;
    for (const proto::ModelInfo& m : r.models()) models.append(InfoDict(m));
    py::dict d;
    d["models"] = models;
    d["used_bytes"] = r.used_bytes();
    d["max_bytes"] = r.max_bytes();
    return d;
  }

 private:
  static py::dict ConfigDict(const google::protobuf::Map<std::string, int64_t>& config) {
    py::dict d;
    for (const auto& [k, v] : std::map<std::string, int64_t>(config.begin(), config.end())) {
      d[py::str(k)] = v;
    }
    return d;
  }
  // [(name, shape tuple)] of the tensors.
  static py::list Layout(const google::protobuf::RepeatedPtrField<proto::Tensor>& tensors) {
    py::list out;
    for (const proto::Tensor& t : tensors) {
      py::tuple shape(t.shape_size());
      for (int i = 0; i < t.shape_size(); ++i) shape[i] = py::int_(t.shape(i));
      out.append(py::make_tuple(t.name(), shape));
    }
    return out;
  }
  static py::dict InfoDict(const proto::ModelInfo& m) {
    py::dict d;
    d["name"] = m.name();
    d["version"] = m.version();
    d["kind"] = m.kind();
    d["config"] = ConfigDict(m.config());
    d["bytes"] = m.bytes();
    d["optimizer_bytes"] = m.optimizer_bytes();
    d["train_steps"] = m.train_steps();
    d["tensors"] = Layout(m.tensors());
    return d;
  }

  void SetDeadline(grpc::ClientContext* ctx) const { channel_->SetDeadline(ctx); }
  void CheckOpen() const { channel_->CheckOpen(); }
  template <typename Rpc>
  void Call(Rpc rpc) {
    channel_->Call(rpc);
  }
  absl::StatusOr<proto::KernelResponse> RunStream(const proto::KernelRequest& req) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    auto stream = channel_->stub()->RunStream(&ctx);
    // One chunk at a time from the request's buffers (a failed write: the
    // worker answered early, Finish says why).
    ml::worker::WriteRequestChunks(
        req, kChunkBytes, [&](const proto::KernelRequestChunk& c) { return stream->Write(c); });
    stream->WritesDone();
    ml::worker::ResponseAssembler assembler(kMaxStreamBytes);
    proto::KernelResponseChunk chunk;
    absl::Status add = absl::OkStatus();
    while (stream->Read(&chunk)) {
      if (add.ok()) add = assembler.Add(std::move(chunk));
    }
    const grpc::Status s = stream->Finish();
    if (!s.ok()) return FromGrpcStatus(s);
    if (!add.ok()) return add;
    return assembler.Finish();
  }

  std::shared_ptr<WorkerChannel> channel_;
};

}  // namespace

void RegisterWorker(py::module_& m) {
  py::class_<WorkerChannel, std::shared_ptr<WorkerChannel>>(m, "_WorkerChannel")
      .def(py::init<std::string, std::string, std::string, double, std::string, std::string>(),
           py::arg("address"), py::arg("tls_root_ca"), py::arg("server_name"), py::arg("timeout_s"),
           py::arg("tls_cert") = "", py::arg("tls_key") = "")
      .def("close", &WorkerChannel::Close);
  py::class_<PyWorkerClient>(m, "_WorkerClient")
      .def(py::init<std::shared_ptr<WorkerChannel>>(), py::arg("channel"))
      .def("health", &PyWorkerClient::Health)
      .def("capabilities", &PyWorkerClient::Capabilities)
      .def("run", &PyWorkerClient::Run, py::arg("kernel"), py::arg("inputs"), py::arg("params"),
           py::arg("backend"), py::arg("model_name"), py::arg("model_version"),
           py::arg("cache_name") = "", py::arg("cache_head") = 0, py::arg("cache_tokens") = 0)
      .def("load_model", &PyWorkerClient::LoadModel, py::arg("name"), py::arg("kind"),
           py::arg("tensors"), py::arg("config"), py::arg("version"), py::arg("replace"),
           py::arg("checkpoint_path"))
      .def("read_model", &PyWorkerClient::ReadModel, py::arg("name"), py::arg("version"))
      .def("unload_model", &PyWorkerClient::UnloadModel, py::arg("name"), py::arg("version"))
      .def("list_models", &PyWorkerClient::ListModels);
}

}  // namespace tandem::python
