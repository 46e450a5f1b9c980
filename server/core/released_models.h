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

namespace tandem::server {

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

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_RELEASED_MODELS_H_
