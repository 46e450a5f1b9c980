#include "server/core/released_models.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace tandem::server {

std::string ReleasedModelPath(const std::string& dir, uint64_t version) {
  return (std::filesystem::path(dir) / absl::StrCat("v", version, ".safetensors")).string();
}

absl::StatusOr<ml::SafetensorsFile> ReleasedModelFile(const std::vector<ml::ParamInfo>& layout,
                                                      absl::Span<const float> params,
                                                      const std::string& task_id,
                                                      uint64_t version) {
  ml::SafetensorsFile file;
  file.metadata = {{"format", "tandem"},
                   {"tandem.task_id", task_id},
                   {"tandem.model_version", absl::StrCat(version)}};
  int64_t covered = 0;
  for (const ml::ParamInfo& p : layout) {
    if (p.offset != covered || p.offset + p.size > static_cast<int64_t>(params.size())) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, " at ", p.offset, "+",
                                                     p.size, " does not tile the model's ",
                                                     params.size(), " parameters"));
    }
    TANDEM_ASSIGN_OR_RETURN(ml::SafeTensor t,
                            ml::Float32Tensor(p.name, p.shape, params.subspan(p.offset, p.size)));
    file.tensors.push_back(std::move(t));
    covered += p.size;
  }
  if (covered != static_cast<int64_t>(params.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the layout covers ", covered, " of ", params.size(), " parameters"));
  }
  return file;
}

absl::Status WriteReleasedModel(const std::string& dir, const std::vector<ml::ParamInfo>& layout,
                                absl::Span<const float> params, const std::string& task_id,
                                uint64_t version) {
  TANDEM_ASSIGN_OR_RETURN(const ml::SafetensorsFile file,
                          ReleasedModelFile(layout, params, task_id, version));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return ml::WriteSafetensorsFile(ReleasedModelPath(dir, version), file);
}

std::vector<uint64_t> ReleasedVersions(const std::string& dir) {
  std::vector<uint64_t> versions;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    absl::string_view name = e.path().filename().native();
    uint64_t v;
    if (absl::ConsumePrefix(&name, "v") && absl::ConsumeSuffix(&name, ".safetensors") &&
        absl::SimpleAtoi(name, &v)) {
      versions.push_back(v);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

}  // namespace tandem::server
