#include "server/core/released_models.h"

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace tandem::server {

namespace {

bool ValidTensorName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ml::ParamInfo>> OpaqueLayout(const proto::ModelSpec& spec,
                                                        int64_t max_params) {
  std::vector<ml::ParamInfo> layout;
  absl::flat_hash_set<std::string> names;
  int64_t offset = 0;
  for (const proto::TensorSpec& t : spec.tensors()) {
    if (!ValidTensorName(t.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("model tensor '", t.name(), "': names are [A-Za-z0-9._/-]{1,128}"));
    }
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("model tensor '", t.name(), "' appears twice"));
    }
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    const int64_t n = ml::ElementCount(shape);
    if (n < 1 || n > max_params - offset ||
        std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 1; })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model tensor '", t.name(), "': every dimension must be >= 1 and the model at most ",
          max_params, " parameters"));
    }
    offset += n;
    ml::AppendNamedTensor(layout, t.name(), std::move(shape));
  }
  if (layout.empty()) return absl::InvalidArgumentError("an opaque model needs tensors");
  return layout;
}

absl::StatusOr<OpaqueModel> OpaqueModelFromFile(const std::string& path, int64_t max_params) {
  TANDEM_ASSIGN_OR_RETURN(const ml::SafetensorsFile file, ml::ReadSafetensorsFile(path));
  OpaqueModel out;
  for (const ml::SafeTensor& t : file.tensors) {
    absl::StatusOr<std::vector<float>> values = ml::AsFloat32(t);
    if (!values.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", values.status().message()));
    }
    proto::TensorSpec* spec = out.spec.add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);  // none: a scalar
    out.params.insert(out.params.end(), values->begin(), values->end());
  }
  absl::Status valid = OpaqueLayout(out.spec, max_params).status();
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return out;
}

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
    const std::string file = e.path().filename().string();  // owns what `name` views
    absl::string_view name = file;
    uint64_t v;
    if (absl::ConsumePrefix(&name, "v") && absl::ConsumeSuffix(&name, ".safetensors") &&
        absl::SimpleAtoi(name, &v)) {
      versions.push_back(v);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

absl::StatusOr<uint64_t> ResolveReleasedVersion(const std::string& dir, const std::string& task_id,
                                                uint64_t version) {
  const std::vector<uint64_t> versions = ReleasedVersions(dir);
  if (versions.empty()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " has released no model yet"));
  }
  if (version == 0) return versions.back();
  if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task_id, " has no released version ", version));
  }
  return version;
}

}  // namespace tandem::server
