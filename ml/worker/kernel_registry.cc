#include "ml/worker/kernel_registry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::worker {

absl::Status KernelRegistry::Register(KernelSpec spec) {
  if (spec.name.empty() || !spec.run) {
    return absl::InvalidArgumentError("kernel needs a name and a runner");
  }
  if (kernels_.contains(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel '", spec.name, "' registered twice"));
  }
  for (const ParamSpec& p : spec.params) {
    if (!(p.min <= p.default_value && p.default_value <= p.max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("default of param '", p.name, "' is outside its range"));
    }
  }
  std::string name = spec.name;
  kernels_.emplace(std::move(name), std::move(spec));
  return absl::OkStatus();
}

const KernelSpec* KernelRegistry::Find(const std::string& name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<proto::KernelInfo> KernelRegistry::Describe() const {
  std::vector<proto::KernelInfo> out;
  const bool gpu = kernels::CudaDeviceAvailable();
  for (const auto& [name, spec] : kernels_) {
    proto::KernelInfo info;
    info.set_name(name);
    info.set_description(spec.description);
    info.add_backends("cpu");
    if (spec.has_cuda && gpu) info.add_backends("cuda");
    auto add = [](const InputSpec& s, proto::TensorSignature* sig) {
      sig->set_name(s.name);
      sig->set_dtype(s.dtype);
      sig->set_rank(s.rank);
    };
    for (const InputSpec& s : spec.inputs) add(s, info.add_inputs());
    for (const InputSpec& s : spec.outputs) add(s, info.add_outputs());
    for (const ParamSpec& p : spec.params) info.add_params(p.name);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return out;
}

absl::StatusOr<KernelCall> KernelRegistry::Validate(const proto::KernelRequest& request) const {
  const KernelSpec* spec = Find(request.kernel());
  if (spec == nullptr) {
    return absl::UnimplementedError(absl::StrCat("unknown kernel '", request.kernel(), "'"));
  }
  KernelCall call;
  TANDEM_ASSIGN_OR_RETURN(call.backend, kernels::ChooseBackend(request.backend(), spec->has_cuda));
  if (request.inputs_size() != static_cast<int>(spec->inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(spec->name, " takes ", spec->inputs.size(),
                                                   " inputs, got ", request.inputs_size()));
  }
  for (size_t i = 0; i < spec->inputs.size(); ++i) {
    const InputSpec& s = spec->inputs[i];
    const proto::Tensor& t = request.inputs(static_cast<int>(i));
    const std::string what = absl::StrCat(spec->name, " input ", i, " (", s.name, ")");
    const bool float_ok = s.dtype == proto::DTYPE_FLOAT32 && t.dtype() == proto::DTYPE_FLOAT64;
    if (t.dtype() != s.dtype && !float_ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dtype ", DTypeName(t.dtype()), ", expected ", DTypeName(s.dtype)));
    }
    if (t.shape_size() != s.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": rank ", t.shape_size(), ", expected ", s.rank));
    }
    TANDEM_ASSIGN_OR_RETURN(WireTensor w, DecodeTensor(t, limits_.max_tensor_elements, what));
    call.inputs.push_back(std::move(w));
  }
  for (const auto& [name, value] : request.params()) {
    const auto it = std::find_if(spec->params.begin(), spec->params.end(),
                                 [&](const ParamSpec& p) { return p.name == name; });
    if (it == spec->params.end()) {
      return absl::InvalidArgumentError(absl::StrCat(spec->name, ": unknown param '", name, "'"));
    }
    if (!std::isfinite(value) || value < it->min || value > it->max ||
        (it->integer && value != std::floor(value))) {
      return absl::InvalidArgumentError(absl::StrCat(spec->name, ": param ", name, " = ", value,
                                                     " must be ", it->integer ? "an integer " : "",
                                                     "in [", it->min, ", ", it->max, "]"));
    }
  }
  for (const ParamSpec& p : spec->params) {
    auto it = request.params().find(p.name);
    call.params[p.name] = it == request.params().end() ? p.default_value : it->second;
  }
  return call;
}

absl::StatusOr<std::vector<proto::Tensor>> KernelRegistry::Run(
    const proto::KernelRequest& request) const {
  absl::StatusOr<KernelCall> call = Validate(request);
  if (!call.ok()) return call.status();
  return Find(request.kernel())->run(*call);
}

}  // namespace tandem::ml::worker
