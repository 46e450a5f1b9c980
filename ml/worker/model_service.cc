// WorkerService's model RPCs: LoadModel (chunks or a checkpoint under
// --model_dir), ReadModel, UnloadModel, ListModels over a ModelStore.
#include <grpcpp/grpcpp.h>
#include <limits.h>
#include <stdlib.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/grpc_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "ml/model/checkpoint.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "ml/worker/worker_service.h"

namespace tandem::ml::worker {
namespace {

grpc::Status NoStore() {
  return ToGrpcStatus(absl::FailedPreconditionError("this worker holds no models"));
}

ModelConfig ConfigOf(const proto::ModelHeader& h) {
  return ModelConfig(h.config().begin(), h.config().end());
}

void FillInfo(const ModelSummary& s, proto::ModelInfo* info) {
  info->set_name(s.name);
  info->set_version(s.version);
  info->set_kind(s.kind);
  for (const auto& [k, v] : s.config) (*info->mutable_config())[k] = v;
  for (const TensorLayout& l : s.tensors) {
    proto::Tensor* t = info->add_tensors();
    t->set_name(l.name);
    t->set_dtype(proto::DTYPE_FLOAT32);
    for (int64_t d : l.shape) t->add_shape(d);
  }
  info->set_bytes(s.bytes);
  info->set_optimizer_bytes(s.optimizer_bytes);
  info->set_train_steps(s.train_steps);
}

// Bytes the header's tensors will take once stored as float32; INVALID_ARGUMENT
// for a negative dimension, a non-float dtype, or an overflowing shape.
absl::StatusOr<int64_t> StoredBytes(const proto::ModelHeader& h) {
  double total = 0;
  for (const proto::Tensor& t : h.tensors()) {
    if (t.dtype() != proto::DTYPE_FLOAT32 && t.dtype() != proto::DTYPE_FLOAT64) {
      return absl::InvalidArgumentError(
          absl::StrCat("model tensor '", t.name(), "' must be float32 or float64"));
    }
    double n = 1;
    for (int64_t d : t.shape()) {
      if (d < 0) return absl::InvalidArgumentError("negative dimension in a model tensor");
      n *= static_cast<double>(d);
    }
    total += n * sizeof(float);
  }
  if (total > 9e18) return absl::InvalidArgumentError("model tensors too large");
  return static_cast<int64_t>(total);
}

// `relative` inside `dir`, resolved (symlinks included). PERMISSION_DENIED
// for an absolute path, a ".." component or a path resolving outside dir;
// NOT_FOUND when it does not exist.
absl::StatusOr<std::string> ResolveModelPath(const std::string& dir, const std::string& relative) {
  if (dir.empty()) {
    return absl::FailedPreconditionError(
        "checkpoint loading is off (the worker has no --model_dir)");
  }
  if (relative.empty() || relative[0] == '/' || relative.find('\0') != std::string::npos) {
    return absl::PermissionDeniedError("checkpoint_path must be relative to the model directory");
  }
  for (absl::string_view part : absl::StrSplit(relative, '/')) {
    if (part == "..") return absl::PermissionDeniedError("checkpoint_path may not contain '..'");
  }
  char root[PATH_MAX], file[PATH_MAX];
  if (realpath(dir.c_str(), root) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model directory ", dir, " is not readable"));
  }
  const std::string joined = absl::StrCat(root, "/", relative);
  if (realpath(joined.c_str(), file) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint '", relative, "' in the model directory"));
  }
  const std::string prefix = absl::StrCat(root, "/");
  if (std::string(file).rfind(prefix, 0) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint '", relative, "' resolves outside the model directory"));
  }
  return std::string(file);
}

}  // namespace

absl::StatusOr<TensorSet> WorkerService::ModelTensorsOf(const proto::ModelHeader& h,
                                                        std::vector<TensorBytes> data) const {
  TensorSet out;
  if (!h.checkpoint_path().empty()) {
    if (h.tensors_size() > 0) {
      return absl::InvalidArgumentError("send tensors or a checkpoint_path, not both");
    }
    if (h.kind() != "mlp" && h.kind() != "cnn") {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoints hold kind mlp or cnn models, not ", h.kind()));
    }
    TANDEM_ASSIGN_OR_RETURN(std::string path,
                            ResolveModelPath(options_.model_dir, h.checkpoint_path()));
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                            MakeZooModel(h.kind(), ConfigOf(h), models_->max_elements()));
    TANDEM_RETURN_IF_ERROR(models_->CheckFits(model->num_params() * int64_t{sizeof(float)},
                                              h.replace() ? h.name() : ""));
    TANDEM_RETURN_IF_ERROR(LoadCheckpoint(path, model.get()));
    return ZooModelTensors(*model);
  }
  if (data.size() != static_cast<size_t>(h.tensors_size())) {
    return absl::InvalidArgumentError("model tensors and their data differ in number");
  }
  for (int i = 0; i < h.tensors_size(); ++i) {
    const proto::Tensor& t = h.tensors(i);
    TANDEM_ASSIGN_OR_RETURN(
        WireTensor w,
        DecodeTensor(t, std::move(data[static_cast<size_t>(i)]), models_->max_elements(),
                     absl::StrCat("model tensor ", i, " (", t.name(), ")")));
    out.push_back({t.name(), std::move(w.f32)});
  }
  return out;
}

grpc::Status WorkerService::LoadModel(grpc::ServerContext* context,
                                      grpc::ServerReader<proto::WorkerModelChunk>* reader,
                                      proto::ModelInfo* response) {
  if (grpc::Status s = Admit(*context, /*writer=*/true); !s.ok()) return s;
  if (models_ == nullptr) return NoStore();
  if (grpc::Status s = TakeSlot(); !s.ok()) return s;
  SlotGuard slot(&in_flight_);
  ByteReservation bytes(&inflight_bytes_, options_.max_inflight_bytes);
  ModelAssembler assembler(static_cast<size_t>(options_.max_stream_bytes), /*float_storage=*/true);
  // On the header, before its data arrives or any buffer is allocated:
  // the in-flight budget, then the model budget.
  assembler.OnHeader([&](const proto::ModelHeader& h, size_t declared) -> absl::Status {
    TANDEM_RETURN_IF_ERROR(bytes.Add(static_cast<int64_t>(declared)));
    TANDEM_ASSIGN_OR_RETURN(const int64_t stored, StoredBytes(h));
    absl::Status fits = models_->CheckFits(stored, h.replace() ? h.name() : "");
    if (!fits.ok()) TANDEM_VLOG(1) << "LoadModel " << h.name() << ": " << fits;
    return fits;
  });
  if (absl::Status s = ReadAllChunks<proto::WorkerModelChunk>(*reader, assembler, bytes); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<Streamed<proto::ModelHeader>> streamed = assembler.FinishStreamed();
  if (!streamed.ok()) {
    return ToGrpcStatus(absl::InvalidArgumentError(streamed.status().message()));
  }
  const proto::ModelHeader* header = &streamed->header;
  absl::StatusOr<TensorSet> tensors = ModelTensorsOf(*header, std::move(streamed->data));
  if (!tensors.ok()) return ToGrpcStatus(tensors.status());
  absl::StatusOr<ModelSummary> loaded =
      models_->Load(header->name(), header->version(), header->kind(), ConfigOf(*header),
                    *std::move(tensors), header->replace());
  if (!loaded.ok()) return ToGrpcStatus(loaded.status());
  FillInfo(*loaded, response);
  TANDEM_VLOG(1) << "loaded model " << loaded->name << " v" << loaded->version << " ("
                 << loaded->kind << ", " << loaded->bytes << " bytes)";
  return grpc::Status::OK;
}

grpc::Status WorkerService::ReadModel(grpc::ServerContext* context,
                                      const proto::ReadModelRequest* request,
                                      grpc::ServerWriter<proto::WorkerModelChunk>* writer) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (models_ == nullptr) return NoStore();
  // A read copies the model into memory to stream it: it takes a slot.
  if (grpc::Status s = TakeSlot(); !s.ok()) return s;
  SlotGuard slot(&in_flight_);
  absl::StatusOr<ModelSnapshot> snap =
      models_->Read(request->model().name(), request->model().version());
  if (!snap.ok()) return ToGrpcStatus(snap.status());
  proto::ModelHeader header;
  header.set_name(snap->summary.name);
  header.set_version(snap->summary.version);
  header.set_kind(snap->summary.kind);
  for (const auto& [k, v] : snap->summary.config) (*header.mutable_config())[k] = v;
  // The data leaves in chunks sliced from the snapshot, not re-encoded.
  std::vector<absl::string_view> data;
  for (const NamedTensor& t : snap->tensors) {
    proto::Tensor* p = header.add_tensors();
    p->set_name(t.name);
    p->set_dtype(proto::DTYPE_FLOAT32);
    for (int64_t d : t.value.shape()) p->add_shape(d);
    data.emplace_back(reinterpret_cast<const char*>(t.value.ptr()),
                      static_cast<size_t>(t.value.size()) * sizeof(float));
  }
  const bool sent =
      WriteModelChunks(header, data, StreamChunkBytes(),
                       [writer](const proto::WorkerModelChunk& c) { return writer->Write(c); });
  if (!sent) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

grpc::Status WorkerService::UnloadModel(grpc::ServerContext* context,
                                        const proto::UnloadModelRequest* request,
                                        proto::UnloadModelResponse* response) {
  if (grpc::Status s = Admit(*context, /*writer=*/true); !s.ok()) return s;
  if (models_ == nullptr) return NoStore();
  absl::StatusOr<int64_t> freed =
      models_->Unload(request->model().name(), request->model().version());
  if (!freed.ok()) return ToGrpcStatus(freed.status());
  response->set_freed_bytes(*freed);
  return grpc::Status::OK;
}

grpc::Status WorkerService::ListModels(grpc::ServerContext* context,
                                       const proto::ListModelsRequest*,
                                       proto::ListModelsResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (models_ == nullptr) return NoStore();
  for (const ModelSummary& s : models_->List()) FillInfo(s, response->add_models());
  response->set_used_bytes(models_->used_bytes());
  response->set_max_bytes(models_->max_bytes());
  return grpc::Status::OK;
}

}  // namespace tandem::ml::worker
