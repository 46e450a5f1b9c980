// tandem.worker.Client (python/tandem/worker.py): any kernel of a running
// tandem-worker (proto/worker.proto) called with NumPy arrays.
//
// Inputs: NumPy arrays (or array-likes) of float32, float64, int32, int64,
// uint64 or uint8, sent as they are (the worker checks them against the
// kernel's signature: INVALID_ARGUMENT -> tandem.InvalidArgumentError);
// other dtypes raise TypeError, NaN/Inf in a float input ValueError before
// anything is sent. Requests above 32 MiB go through RunStream in chunks.
// GIL: released during the RPC (and the kernel's run on the worker).
// Thread safety: a Client may be used from several threads at once (gRPC
// stubs are thread-safe), except close(), which must not race a call.
#include <grpcpp/grpcpp.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/grpc_credentials.h"
#include "base/grpc_status.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "python/src/common.h"

namespace tandem::python {
namespace {

constexpr size_t kStreamAbove = size_t{32} << 20;  // request bytes sent with RunStream
constexpr size_t kChunkBytes = size_t{4} << 20;
constexpr int kMaxMessageBytes = 64 << 20;  // the worker's default cap
constexpr size_t kMaxStreamBytes = size_t{1} << 30;

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
  PyWorkerClient(const std::string& address, const std::string& tls_root_ca,
                 const std::string& server_name, double timeout_s)
      : timeout_s_(timeout_s) {
    if (!(timeout_s > 0)) throw py::value_error("timeout_s must be positive");
    TlsFiles tls;
    tls.insecure_plaintext = tls_root_ca.empty();
    tls.root_ca_path = tls_root_ca;
    auto creds = ValueOrThrow(MakeChannelCredentials(tls));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
    stub_ = proto::Worker::NewStub(grpc::CreateCustomChannel(address, creds, args));
  }

  // Drops the channel (a worker shutting down waits for open channels).
  // Not while calls are in flight.
  void Close() { stub_.reset(); }

  py::dict Health() {
    proto::HealthResponse r;
    Call([&](grpc::ClientContext* ctx) { return stub_->Health(ctx, {}, &r); });
    py::dict d;
    d["serving"] = r.serving();
    d["backend"] = r.backend();
    return d;
  }

  py::list Capabilities() {
    proto::CapabilitiesResponse r;
    Call([&](grpc::ClientContext* ctx) { return stub_->Capabilities(ctx, {}, &r); });
    auto signature = [](const google::protobuf::RepeatedPtrField<proto::TensorSignature>& s) {
      py::list out;
      for (const proto::TensorSignature& t : s) {
        py::dict d;
        d["name"] = t.name();
        d["dtype"] = absl::AsciiStrToLower(proto::DType_Name(t.dtype()).substr(6));
        d["rank"] = t.rank();
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
      out.append(d);
    }
    return out;
  }

  py::tuple Run(const std::string& kernel, py::handle inputs,
                const std::map<std::string, double>& params, const std::string& backend) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    req.set_backend(backend);
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
      Call([&](grpc::ClientContext* ctx) { return stub_->Run(ctx, req, &resp); });
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
    return py::make_tuple(outputs, resp.backend(), resp.elapsed_us());
  }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(timeout_s_ * 1e6)));
  }
  // Runs one unary RPC with the GIL released; raises its error.
  void CheckOpen() const {
    if (stub_ == nullptr) ThrowStatus(absl::FailedPreconditionError("the client is closed"));
  }
  template <typename Rpc>
  void Call(Rpc rpc) {
    CheckOpen();
    grpc::Status s;
    {
      py::gil_scoped_release release;
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      s = rpc(&ctx);
    }
    OkOrThrow(FromGrpcStatus(s));
  }
  absl::StatusOr<proto::KernelResponse> RunStream(const proto::KernelRequest& req) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    auto stream = stub_->RunStream(&ctx);
    for (const proto::KernelRequestChunk& c : ml::worker::SplitRequest(req, kChunkBytes)) {
      if (!stream->Write(c)) break;
    }
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

  double timeout_s_;
  std::unique_ptr<proto::Worker::Stub> stub_;
};

}  // namespace

void RegisterWorker(py::module_& m) {
  py::class_<PyWorkerClient>(m, "_WorkerClient")
      .def(py::init<std::string, std::string, std::string, double>(), py::arg("address"),
           py::arg("tls_root_ca"), py::arg("server_name"), py::arg("timeout_s"))
      .def("close", &PyWorkerClient::Close)
      .def("health", &PyWorkerClient::Health)
      .def("capabilities", &PyWorkerClient::Capabilities)
      .def("run", &PyWorkerClient::Run, py::arg("kernel"), py::arg("inputs"), py::arg("params"),
           py::arg("backend"));
}

}  // namespace tandem::python
