#include "server/transport/worker_evaluator.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/grpc_policy.h"
#include "base/grpc_status.h"
#include "base/net_address.h"
#include "base/status_macros.h"

namespace tandem::server {
namespace {

// The kernel of ml/worker that evaluates a loaded mlp/cnn model: inputs
// features [n, d] and labels [n] (class indices as float32); output one
// float32 tensor [3] = {mean cross-entropy loss, correct, n}.
constexpr char kEvaluateKernel[] = "model.evaluate";

proto::Tensor FloatTensor(const std::string& name, std::vector<int64_t> shape,
                          absl::Span<const float> values) {
  proto::Tensor t;
  t.set_name(name);
  for (int64_t d : shape) t.add_shape(d);
  t.set_dtype(proto::DTYPE_FLOAT32);
  t.mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                           values.size() * sizeof(float));
  return t;
}

void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerEvaluator>> WorkerEvaluator::Create(
    WorkerEvaluatorOptions options, const ml::Dataset& eval) {
  if (options.address.empty()) return absl::InvalidArgumentError("worker: empty address");
  grpc::ChannelArguments args = rpc::ChannelArgs();
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(-1);
  if (options.tls.insecure_plaintext) {
    if (!IsLoopbackAddress(options.address)) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker: plaintext to the non-loopback address '", options.address,
                       "' is refused (the held-out data would travel in the clear): use TLS"));
    }
  } else {
    if (options.tls.cert_chain_path.empty() || options.tls.private_key_path.empty()) {
      return absl::InvalidArgumentError(
          "worker: mutual TLS needs this daemon's certificate and key (--tls_cert, --tls_key)");
    }
    if (options.server_name.empty()) {
      return absl::InvalidArgumentError("worker: the worker's TLS identity is required");
    }
    args.SetSslTargetNameOverride(options.server_name);
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                          MakeChannelCredentials(options.tls));
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  return CreateWithChannel(std::move(options), eval, std::move(channel));
}

absl::StatusOr<std::unique_ptr<WorkerEvaluator>> WorkerEvaluator::CreateWithChannel(
    WorkerEvaluatorOptions options, const ml::Dataset& eval,
    std::shared_ptr<grpc::Channel> channel) {
  if (options.task_id.empty()) return absl::InvalidArgumentError("worker: empty task id");
  if (options.chunk_bytes == 0) return absl::InvalidArgumentError("worker: chunk_bytes is 0");
  if (eval.size() == 0) return absl::InvalidArgumentError("worker: empty held-out data");
  TANDEM_RETURN_IF_ERROR(eval.Validate());
  auto e = std::unique_ptr<WorkerEvaluator>(new WorkerEvaluator(std::move(options), channel));
  proto::KernelRequest& r = e->eval_request_;
  r.set_kernel(kEvaluateKernel);
  const ml::Matrix& x = eval.features;
  *r.add_inputs() = FloatTensor("features", {x.rows(), x.cols()},
                                absl::MakeConstSpan(x.data(), static_cast<size_t>(x.size())));
  std::vector<float> labels(eval.labels.begin(), eval.labels.end());
  *r.add_inputs() = FloatTensor("labels", {static_cast<int64_t>(labels.size())}, labels);
  r.mutable_model()->set_name(e->model_name_);
  return e;
}

WorkerEvaluator::WorkerEvaluator(WorkerEvaluatorOptions options,
                                 std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      model_name_(absl::StrCat("federation.", options_.task_id)),
      stub_(proto::Worker::NewStub(std::move(channel))) {
  status_.set_address(options_.address);
  status_.set_model_name(model_name_);
}

absl::Status WorkerEvaluator::Push(const ml::Model& model, const proto::ModelSpec& spec,
                                   uint64_t version) {
  proto::WorkerModelChunk first;
  proto::ModelHeader& h = *first.mutable_header();
  h.set_name(model_name_);
  h.set_version(version);
  h.set_kind("mlp");  // proto::ModelSpec describes ml::MakeMlp models only
  h.set_replace(true);
  auto& config = *h.mutable_config();
  config["in"] = spec.input_dim();
  config["classes"] = spec.num_classes();
  config["hidden_layers"] = spec.hidden_size();
  for (int i = 0; i < spec.hidden_size(); ++i) config[absl::StrCat("hidden", i)] = spec.hidden(i);
  const absl::Span<const float> flat = model.params();
  for (const ml::ParamInfo& p : model.param_infos()) {
    proto::Tensor& t = *h.add_tensors();
    t.set_name(p.name);
    for (int64_t d : p.shape) t.add_shape(d);
    t.set_dtype(proto::DTYPE_FLOAT32);
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.deadline);
  proto::ModelInfo info;
  std::unique_ptr<grpc::ClientWriter<proto::WorkerModelChunk>> writer =
      stub_->LoadModel(&ctx, &info);
  bool sent = writer->Write(first);
  // Each tensor's bytes in pieces of at most chunk_bytes, appended by the
  // worker to tensors[tensor_index].data in order.
  const std::vector<ml::ParamInfo>& infos = model.param_infos();
  for (size_t i = 0; sent && i < infos.size(); ++i) {
    const char* bytes = reinterpret_cast<const char*>(flat.data() + infos[i].offset);
    const size_t size = static_cast<size_t>(infos[i].size) * sizeof(float);
    for (size_t off = 0; sent && off < size; off += options_.chunk_bytes) {
      proto::WorkerModelChunk c;
      c.set_tensor_index(static_cast<uint32_t>(i));
      c.set_data(bytes + off, std::min(options_.chunk_bytes, size - off));
      sent = writer->Write(c);
    }
  }
  writer->WritesDone();
  TANDEM_RETURN_IF_ERROR(FromGrpcStatus(writer->Finish()));
  if (info.version() != version) {
    return absl::InternalError(absl::StrCat("worker: loaded version ", info.version(),
                                            " of ", model_name_, ", expected ", version));
  }
  absl::MutexLock lock(&mu_);
  status_.set_model_version(version);
  return absl::OkStatus();
}

absl::StatusOr<ml::EvalStats> WorkerEvaluator::RunEvaluate(uint64_t version) {
  eval_request_.mutable_model()->set_version(version);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.deadline);
  proto::KernelResponse response;
  TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub_->Run(&ctx, eval_request_, &response)));
  if (response.outputs_size() != 1 || response.outputs(0).data().size() != 3 * sizeof(float)) {
    return absl::InternalError("worker: model.evaluate answered an unexpected shape");
  }
  float v[3];
  std::memcpy(v, response.outputs(0).data().data(), sizeof(v));
  const int64_t n = eval_request_.inputs(1).shape(0);
  if (static_cast<int64_t>(v[2]) != n || v[1] < 0 || v[1] > v[2]) {
    return absl::InternalError(absl::StrCat("worker: model.evaluate counted ", v[1], " of ", v[2],
                                            " examples, sent ", n));
  }
  return ml::EvalStats{static_cast<double>(v[0]),
                       static_cast<double>(v[1]) / static_cast<double>(n)};
}

absl::StatusOr<ml::EvalStats> WorkerEvaluator::Evaluate(const ml::Model& model,
                                                        const proto::ModelSpec& spec,
                                                        uint64_t version) {
  absl::Status pushed = Push(model, spec, version);
  if (!pushed.ok()) {
    RecordFailure(pushed);
    return pushed;
  }
  absl::StatusOr<ml::EvalStats> e = RunEvaluate(version);
  if (!e.ok()) {
    RecordFailure(e.status());
    return e.status();
  }
  absl::MutexLock lock(&mu_);
  status_.set_evaluations(status_.evaluations() + 1);
  return e;
}

void WorkerEvaluator::RecordFailure(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  status_.set_failures(status_.failures() + 1);
  status_.set_last_error(std::string(status.ToString()));
}

proto::WorkerModelStatus WorkerEvaluator::Status() {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace tandem::server
