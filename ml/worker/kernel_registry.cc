#include "ml/worker/kernel_registry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tandem::ml::worker {
namespace {

TensorSet::const_iterator FindTensor(const TensorSet& set, const std::string& name) {
  return std::find_if(set.begin(), set.end(), [&](const NamedTensor& t) { return t.name == name; });
}

bool IsZoo(const std::string& kind) { return kind == "mlp" || kind == "cnn"; }

// A zoo model's tensors (ml::Model parameter order) as its flat vector.
kernels::Tensor Flatten(const TensorSet& set) {
  std::vector<float> flat;
  for (const NamedTensor& t : set) {
    flat.insert(flat.end(), t.value.data().begin(), t.value.data().end());
  }
  const int64_t n = static_cast<int64_t>(flat.size());
  return *kernels::Tensor::FromData({n}, std::move(flat));
}

// Inputs marked from_model, taken by name from a "tensors" model; for a
// zoo model ("mlp", "cnn") the input "weights" is its flat parameter vector.
absl::Status FillFromTensors(const KernelSpec& spec, const LoadedModel& m, KernelCall* call) {
  const TensorSet& set = std::get<TensorSet>(m.weights);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const InputSpec& s = spec.inputs[i];
    if (!s.from_model) continue;
    if (IsZoo(m.kind) && s.name == "weights" && s.rank == 1) {
      call->inputs[i].f32 = Flatten(set);
      call->inputs[i].shape = call->inputs[i].f32.shape();
      continue;
    }
    auto it = FindTensor(set, s.model_name());
    if (it == set.end() || it->value.rank() != s.rank || s.dtype != proto::DTYPE_FLOAT32) {
      return absl::InvalidArgumentError(absl::StrCat(spec.name, " needs a float32 tensor '",
                                                     s.model_name(), "' of rank ", s.rank,
                                                     " in model '", m.name, "'"));
    }
    WireTensor& w = call->inputs[i];
    w.shape = it->value.shape();
    w.f32 = it->value;
  }
  return absl::OkStatus();
}

// Outputs marked from_model, written by name into a "tensors" model: all
// shapes are checked before any tensor is replaced.
absl::Status WriteToTensors(const std::vector<std::pair<std::string, proto::Tensor*>>& outs,
                            LoadedModel* m) {
  TensorSet& set = std::get<TensorSet>(m->weights);
  std::vector<std::pair<size_t, kernels::Tensor>> updates;
  for (const auto& [name, t] : outs) {
    TANDEM_RETURN_IF_ERROR(CheckFiniteOutput(*t, absl::StrCat("model tensor '", name, "'")));
    TANDEM_ASSIGN_OR_RETURN(kernels::Tensor value, ToFloatTensor(*t));
    if (IsZoo(m->kind) && name == "weights") {
      // The flat vector back into the zoo model's tensors.
      int64_t total = 0;
      for (const NamedTensor& p : set) total += p.value.size();
      if (value.size() != total) {
        return absl::InvalidArgumentError(absl::StrCat("model '", m->name, "' has ", total,
                                                       " parameters, not ", value.size()));
      }
      int64_t offset = 0;
      for (size_t i = 0; i < set.size(); ++i) {
        kernels::Tensor part = set[i].value;
        std::copy_n(value.data().begin() + offset, part.size(), part.mutable_data().begin());
        offset += part.size();
        updates.emplace_back(i, std::move(part));
      }
      continue;
    }
    auto it = FindTensor(set, name);
    if (it == set.end() || it->value.shape() != value.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", m->name, "' has no tensor '", name,
                                                     "' of shape ", value.ShapeString()));
    }
    updates.emplace_back(static_cast<size_t>(it - set.begin()), std::move(value));
  }
  for (auto& [i, v] : updates) set[i].value = std::move(v);
  return absl::OkStatus();
}

bool AcceptsCache(const KernelSpec& spec) {
  return std::any_of(spec.inputs.begin(), spec.inputs.end(),
                     [](const InputSpec& s) { return !s.from_cache.empty(); });
}

// Inputs marked from_cache, read from the cache the request names: one
// token count for all of them (appends may go on meanwhile).
absl::Status FillFromCache(const KernelSpec& spec, const proto::KvCacheRef& ref,
                           const KvCacheStore& caches, absl::string_view owner, KernelCall* call) {
  const std::string key = KvCacheStore::Key(owner, ref.name());
  int64_t tokens = ref.tokens();
  if (tokens == 0) {
    TANDEM_ASSIGN_OR_RETURN(KvCacheSummary info, caches.Find(key));
    tokens = info.tokens;
    if (tokens == 0) {
      return absl::FailedPreconditionError(absl::StrCat("KV cache '", ref.name(), "' is empty"));
    }
  }
  if (spec.gathers_from_cache) {  // the runner reads the cache itself
    call->cache = &caches;
    call->cache_key = key;
    call->cache_tokens = tokens;
    call->cache_head = ref.head();
    return absl::OkStatus();
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const InputSpec& s = spec.inputs[i];
    if (s.from_cache.empty()) continue;
    WireTensor& w = call->inputs[i];
    if (s.from_cache == "codes") {
      TANDEM_ASSIGN_OR_RETURN(w.raw, caches.ReadCodes(key, ref.head(), tokens));
      w.dtype = proto::DTYPE_UINT8;
      w.shape = {tokens, static_cast<int64_t>(w.raw.size()) / tokens};
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(
        w.f32,
        caches.ReadFloats(key, s.from_cache == "keys" ? KvPart::kKeys : KvPart::kValues, tokens));
    w.dtype = proto::DTYPE_FLOAT32;
    w.shape = w.f32.shape();
  }
  return absl::OkStatus();
}

}  // namespace

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
      sig->set_from_model(s.from_model);
      if (s.from_model) sig->set_model_tensor(s.model_name());
      sig->set_from_cache(s.from_cache);
    };
    info.set_accepts_kv_cache(AcceptsCache(spec));
    for (const std::string& k : spec.model_kinds) info.add_model_kinds(k);
    info.set_model_required(spec.model_required);
    info.set_trains_model(spec.trains_model);
    for (const InputSpec& s : spec.inputs) add(s, info.add_inputs());
    for (const InputSpec& s : spec.outputs) add(s, info.add_outputs());
    for (const ParamSpec& p : spec.params) info.add_params(p.name);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return out;
}

absl::StatusOr<KernelCall> KernelRegistry::Validate(const proto::KernelRequest& request,
                                                    ModelStore* models, const KvCacheStore* caches,
                                                    absl::string_view cache_owner) const {
  return ValidateImpl(request, nullptr, models, caches, cache_owner);
}

absl::StatusOr<KernelCall> KernelRegistry::Validate(const proto::KernelRequest& request,
                                                    std::vector<TensorBytes> streamed,
                                                    ModelStore* models, const KvCacheStore* caches,
                                                    absl::string_view cache_owner) const {
  if (streamed.size() != static_cast<size_t>(request.inputs_size())) {
    return absl::InvalidArgumentError(absl::StrCat("request declares ", request.inputs_size(),
                                                   " inputs, ", streamed.size(), " streamed"));
  }
  return ValidateImpl(request, &streamed, models, caches, cache_owner);
}

absl::StatusOr<KernelCall> KernelRegistry::ValidateImpl(const proto::KernelRequest& request,
                                                        std::vector<TensorBytes>* streamed,
                                                        ModelStore* models,
                                                        const KvCacheStore* caches,
                                                        absl::string_view cache_owner) const {
  const KernelSpec* spec = Find(request.kernel());
  if (spec == nullptr) {
    return absl::UnimplementedError(absl::StrCat("unknown kernel '", request.kernel(), "'"));
  }
  KernelCall call;
  TANDEM_ASSIGN_OR_RETURN(call.backend, kernels::ChooseBackend(request.backend(), spec->has_cuda));
  const bool with_model = !request.model().name().empty();
  if (with_model && spec->model_kinds.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(spec->name, " takes no model"));
  }
  if (!with_model && spec->model_required) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec->name, " needs a loaded model (KernelRequest.model)"));
  }
  const bool with_cache = !request.kv_cache().name().empty();
  if (with_cache && !AcceptsCache(*spec)) {
    return absl::InvalidArgumentError(absl::StrCat(spec->name, " takes no KV cache"));
  }
  if (with_cache && caches == nullptr) {
    return absl::FailedPreconditionError("this worker holds no KV caches");
  }
  // With a model or cache, the inputs it supplies are not sent.
  auto supplied = [&](const InputSpec& s) {
    return (with_model && s.from_model) || (with_cache && !s.from_cache.empty());
  };
  size_t expected = 0;
  for (const InputSpec& s : spec->inputs) expected += supplied(s) ? 0 : 1;
  if (request.inputs_size() != static_cast<int>(expected)) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec->name, " takes ", expected, " inputs", with_model ? " with a model" : "",
                     with_cache ? " with a KV cache" : "", ", got ", request.inputs_size()));
  }
  int next = 0;
  for (size_t i = 0; i < spec->inputs.size(); ++i) {
    const InputSpec& s = spec->inputs[i];
    if (supplied(s)) {
      call.inputs.push_back(WireTensor{s.name, s.dtype, {}, {}, {}});
      continue;
    }
    const int index = next++;
    const proto::Tensor& t = request.inputs(index);
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
    TANDEM_ASSIGN_OR_RETURN(
        WireTensor w, streamed == nullptr
                          ? DecodeTensor(t, limits_.max_tensor_elements, what)
                          : DecodeTensor(t, std::move((*streamed)[static_cast<size_t>(index)]),
                                         limits_.max_tensor_elements, what));
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
  if (with_cache)
    TANDEM_RETURN_IF_ERROR(FillFromCache(*spec, request.kv_cache(), *caches, cache_owner, &call));
  if (with_model) {
    if (models == nullptr) {
      return absl::FailedPreconditionError("this worker holds no models");
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ModelLease> lease,
                            models->Acquire(request.model().name(), request.model().version(),
                                            spec->trains_model));
    call.model = std::move(lease);
    const LoadedModel& m = call.model->model();
    if (std::find(spec->model_kinds.begin(), spec->model_kinds.end(), m.kind) ==
        spec->model_kinds.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "' is of kind ", m.kind,
                                                     "; ", spec->name, " takes kind ",
                                                     absl::StrJoin(spec->model_kinds, ", ")));
    }
    if (m.kind == "tensors" || IsZoo(m.kind)) {
      TANDEM_RETURN_IF_ERROR(FillFromTensors(*spec, m, &call));
    }
  }
  return call;
}

absl::StatusOr<std::vector<proto::Tensor>> KernelRegistry::RunCall(const KernelSpec& spec,
                                                                   KernelCall& call) const {
  TANDEM_ASSIGN_OR_RETURN(std::vector<proto::Tensor> outputs, spec.run(call));
  if (call.model == nullptr) return outputs;
  if (spec.trains_model) {
    // A step whose answer is not finite must not change the model either.
    for (size_t i = 0; i < outputs.size(); ++i) {
      TANDEM_RETURN_IF_ERROR(CheckFiniteOutput(
          outputs[i], absl::StrCat(spec.name, " output ", i, " (", outputs[i].name(), ")")));
    }
  }
  std::vector<proto::Tensor> kept;
  std::vector<std::pair<std::string, proto::Tensor*>> into_model;
  for (size_t i = 0; i < outputs.size() && i < spec.outputs.size(); ++i) {
    if (spec.outputs[i].from_model) {
      into_model.emplace_back(spec.outputs[i].model_name(), &outputs[i]);
    } else {
      kept.push_back(std::move(outputs[i]));
    }
  }
  const std::string& kind = call.model->model().kind;
  if ((kind == "tensors" || IsZoo(kind)) && !into_model.empty()) {
    LoadedModel* m = call.model->mutable_model();
    if (m == nullptr) return absl::InternalError(absl::StrCat(spec.name, " holds a shared lease"));
    TANDEM_RETURN_IF_ERROR(WriteToTensors(into_model, m));
  }
  if (spec.trains_model) call.model->FinishStep();
  return kept;
}

absl::StatusOr<std::vector<proto::Tensor>> KernelRegistry::Run(
    const proto::KernelRequest& request, ModelStore* models, const KvCacheStore* caches,
    absl::string_view cache_owner) const {
  absl::StatusOr<KernelCall> call = Validate(request, models, caches, cache_owner);
  if (!call.ok()) return call.status();
  return RunCall(*Find(request.kernel()), *call);
}

}  // namespace tandem::ml::worker
