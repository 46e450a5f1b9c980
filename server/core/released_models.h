// Released models as versioned safetensors files (issue 33 item 3): the
// coordinator writes <dir>/v<version>.safetensors once a round's release is
// durable in its store, one tensor per model parameter ("<layer>.<param>",
// the model's shape, F32) plus metadata naming the task and version, so
// that any tool that reads safetensors (PyTorch, Hugging Face, NumPy through
// tandem.load_safetensors) takes the model out. `tandem-admin task export`
// copies one after validating it.
//
// Thread safety: free functions; one writer per directory (the
// coordinator's Tick thread). Errors: INVALID_ARGUMENT for parameters that
// do not fit the layout, INTERNAL / NOT_FOUND for the file system.
#ifndef TANDEM_SERVER_CORE_RELEASED_MODELS_H_
#define TANDEM_SERVER_CORE_RELEASED_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/model.h"
#include "ml/model/safetensors.h"
#include "proto/coordinator.pb.h"

namespace tandem::server {

// The parameter layout of an opaque model (proto::ModelSpec.tensors): one
// ParamInfo per tensor in order (FedLUAR may recycle those of rank >= 2).
// INVALID_ARGUMENT naming the tensor for an empty, duplicate or malformed
// name ([A-Za-z0-9._/-]{1,128}), a dimension < 1 (no dimension: a
// scalar), or more than
// max_params parameters in all.
absl::StatusOr<std::vector<ml::ParamInfo>> OpaqueLayout(const proto::ModelSpec& spec,
                                                        int64_t max_params);

// An opaque model from a safetensors file (F32 tensors, finite): the spec's
// tensors (the file's names and shapes, in its order) and the initial
// parameters. INVALID_ARGUMENT / NOT_FOUND naming the file and tensor.
struct OpaqueModel {
  proto::ModelSpec spec;
  std::vector<float> params;
};
absl::StatusOr<OpaqueModel> OpaqueModelFromFile(const std::string& path, int64_t max_params);

// <dir>/v<version>.safetensors
std::string ReleasedModelPath(const std::string& dir, uint64_t version);

// The safetensors form of `params` laid out as `layout`'s parameters.
absl::StatusOr<ml::SafetensorsFile> ReleasedModelFile(const std::vector<ml::ParamInfo>& layout,
                                                      absl::Span<const float> params,
                                                      const std::string& task_id, uint64_t version);

// Writes version `version` (creating `dir`), atomically (write, fsync,
// rename). Rewriting an existing version replaces it with the same bytes.
absl::Status WriteReleasedModel(const std::string& dir, const std::vector<ml::ParamInfo>& layout,
                                absl::Span<const float> params, const std::string& task_id,
                                uint64_t version);

// The released versions in `dir`, ascending (empty when none or no dir).
std::vector<uint64_t> ReleasedVersions(const std::string& dir);

// `version` (0 = the latest) of task `task_id`'s released models in `dir`:
// NOT_FOUND naming the task when it released none, or not that version.
absl::StatusOr<uint64_t> ResolveReleasedVersion(const std::string& dir, const std::string& task_id,
                                                uint64_t version);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_RELEASED_MODELS_H_
