#include "ml/worker/model_kinds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/huge_pages.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

namespace s = kernels::search;
using kernels::Tensor;
// (name, slot, expected shape) for every tensor of a typed model.
using Visitor = std::function<void(const std::string&, Tensor*, std::vector<int64_t>)>;

constexpr int64_t kMaxLayers = 64;

absl::Status CheckConfig(absl::string_view kind, const ModelConfig& config,
                         const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    if (!config.contains(k)) {
      return absl::InvalidArgumentError(absl::StrCat("model kind ", kind, " needs config '", k,
                                                     "' (keys: ", absl::StrJoin(keys, ", "), ")"));
    }
  }
  for (const auto& [k, v] : config) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model kind ", kind, ": unknown config key '", k, "'"));
    }
    if (v < 1 || v > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config ", k, " = ", v, " must be in [1, 2^24]"));
    }
  }
  return absl::OkStatus();
}

// --- per-kind structure: an empty typed model sized from config, visited.

absl::StatusOr<kernels::RenWeights> RenShell(const ModelConfig& c) {
  TANDEM_RETURN_IF_ERROR(CheckConfig("ren", c, {"dim", "heads", "layers"}));
  kernels::RenWeights w;
  w.dim = c.at("dim");
  w.heads = c.at("heads");
  if (w.dim % 2 != 0 || w.dim % w.heads != 0 || c.at("layers") > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("ren config: dim ", w.dim,
                                                   " must be even and divisible by heads ", w.heads,
                                                   ", layers <= ", kMaxLayers));
  }
  w.layers.resize(static_cast<size_t>(c.at("layers")));
  return w;
}

void VisitRen(kernels::RenWeights& w, const Visitor& v) {
  const int64_t d = w.dim;
  v("fourier", &w.fourier, {2, d / 2});
  v("w_p", &w.w_p, {d, d});
  v("b_p", &w.b_p, {d});
  for (size_t i = 0; i < w.layers.size(); ++i) {
    kernels::RenLayerWeights& l = w.layers[i];
    const std::string p = absl::StrCat("layers.", i, ".");
    v(p + "ln_q_gamma", &l.ln_q_gamma, {d});
    v(p + "ln_q_beta", &l.ln_q_beta, {d});
    v(p + "w_q", &l.w_q, {d, d});
    v(p + "w_k", &l.w_k, {d, d});
    v(p + "w_v", &l.w_v, {d, d});
    v(p + "w_o", &l.w_o, {d, d});
    v(p + "ln_in_gamma", &l.ln_in_gamma, {d});
    v(p + "ln_in_beta", &l.ln_in_beta, {d});
    v(p + "w1", &l.w1, {d, 2 * d});
    v(p + "b1", &l.b1, {2 * d});
    v(p + "w2", &l.w2, {2 * d, d});
    v(p + "b2", &l.b2, {d});
    v(p + "ln_out_gamma", &l.ln_out_gamma, {d});
    v(p + "ln_out_beta", &l.ln_out_beta, {d});
  }
  v("ln_f_gamma", &w.ln_f_gamma, {d});
  v("ln_f_beta", &w.ln_f_beta, {d});
  v("w_out", &w.w_out, {d, d});
}

// "chunk" (the scan's SSD chunk, 0 = naive recurrence) is optional and the
// only key that may be 0: it is not a weight but lives in the config the
// encoder reads, and a shared (read-only) model cannot take it per request.
absl::StatusOr<s::TrajMambaWeights> TrajMambaShell(ModelConfig c) {
  s::TrajMambaWeights w;
  if (auto it = c.find("chunk"); it != c.end()) {
    w.config.chunk = it->second;
    c.erase(it);
  }
  TANDEM_RETURN_IF_ERROR(
      CheckConfig("trajmamba.encoder", c,
                  {"d_model", "d_state", "head_dim", "expand", "d_conv", "layers", "road_vocab"}));
  w.config.d_model = c.at("d_model");
  w.config.d_state = c.at("d_state");
  w.config.head_dim = c.at("head_dim");
  w.config.expand = c.at("expand");
  w.config.d_conv = c.at("d_conv");
  w.config.layers = c.at("layers");
  w.config.road_vocab = c.at("road_vocab");
  TANDEM_RETURN_IF_ERROR(s::ValidateConfig(w.config));
  w.gps.layers.resize(static_cast<size_t>(w.config.layers));
  w.road.layers.resize(static_cast<size_t>(w.config.layers));
  return w;
}

void VisitBranch(const std::string& name, int64_t n_aux, const s::TrajMambaConfig& c,
                 s::BranchWeights& b, const Visitor& v) {
  const int64_t d = c.d_model, e = c.d_inner(), h = c.heads();
  v(name + ".w_aux", &b.w_aux, {n_aux, c.layers * c.aux_width()});
  v(name + ".b_aux", &b.b_aux, {c.layers * c.aux_width()});
  for (size_t i = 0; i < b.layers.size(); ++i) {
    s::MambaLayerWeights& l = b.layers[i];
    const std::string p = absl::StrCat(name, ".layers.", i, ".");
    v(p + "norm", &l.norm, {d});
    v(p + "w_in", &l.w_in, {d, 2 * e});
    v(p + "conv_w", &l.conv_w, {e, c.d_conv});
    v(p + "conv_b", &l.conv_b, {e});
    v(p + "a_log", &l.a_log, {h});
    v(p + "dt_bias", &l.dt_bias, {h});
    v(p + "d", &l.d, {h});
    v(p + "gate_norm", &l.gate_norm, {e});
    v(p + "w_out", &l.w_out, {e, d});
  }
  v(name + ".final_norm", &b.final_norm, {d});
}

void VisitTrajMamba(s::TrajMambaWeights& w, const Visitor& v) {
  const int64_t d = w.config.d_model;
  v("w_gps", &w.w_gps, {s::kGpsFeatures, d});
  v("b_gps", &w.b_gps, {d});
  v("road_embedding", &w.road_embedding, {w.config.road_vocab, d});
  VisitBranch("gps", s::kGpsAux, w.config, w.gps, v);
  VisitBranch("road", s::kRoadAux, w.config, w.road, v);
}

absl::StatusOr<std::pair<int64_t, int64_t>> MaskShell(const ModelConfig& c) {
  TANDEM_RETURN_IF_ERROR(CheckConfig("trajmamba.mask", c, {"dim", "hidden"}));
  if (c.at("dim") > 4096 || c.at("hidden") > 4096) {
    return absl::InvalidArgumentError("trajmamba.mask dim and hidden must be <= 4096");
  }
  return std::make_pair(c.at("dim"), c.at("hidden"));
}

void VisitMask(s::MaskGeneratorWeights& w, int64_t d, int64_t hidden, const Visitor& v) {
  v("w1", &w.w1, {d, hidden});
  v("b1", &w.b1, {hidden});
  v("w2", &w.w2, {hidden});
  v("b2", &w.b2, {1});
}

absl::StatusOr<int64_t> HashShell(const ModelConfig& c) {
  TANDEM_RETURN_IF_ERROR(CheckConfig("spotlight.hash", c, {"dim"}));
  if (c.at("dim") % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spotlight.hash dim ", c.at("dim"), " must be a multiple of 32"));
  }
  return c.at("dim");
}

void VisitHash(kernels::SpotlightHashWeights& w, int64_t d, const Visitor& v) {
  v("w1", &w.w1, {d, d});
  v("b1", &w.b1, {d});
  v("w2", &w.w2, {d, d});
  v("b2", &w.b2, {d});
}

// A typed shell of the kind, and how to visit it.
struct Shell {
  ModelWeights weights;
  std::function<void(ModelWeights&, const Visitor&)> visit;
};

absl::StatusOr<Shell> MakeShell(absl::string_view kind, const ModelConfig& c,
                                int64_t max_elements) {
  if (kind == "ren") {
    TANDEM_ASSIGN_OR_RETURN(kernels::RenWeights w, RenShell(c));
    return Shell{std::move(w), [](ModelWeights& m, const Visitor& v) {
                   VisitRen(std::get<kernels::RenWeights>(m), v);
                 }};
  }
  if (kind == "trajmamba.encoder") {
    TANDEM_ASSIGN_OR_RETURN(s::TrajMambaWeights w, TrajMambaShell(c));
    return Shell{std::move(w), [](ModelWeights& m, const Visitor& v) {
                   VisitTrajMamba(std::get<s::TrajMambaWeights>(m), v);
                 }};
  }
  if (kind == "trajmamba.mask") {
    TANDEM_ASSIGN_OR_RETURN(auto dh, MaskShell(c));
    return Shell{s::MaskGeneratorWeights{}, [dh](ModelWeights& m, const Visitor& v) {
                   VisitMask(std::get<s::MaskGeneratorWeights>(m), dh.first, dh.second, v);
                 }};
  }
  if (kind == "spotlight.hash") {
    TANDEM_ASSIGN_OR_RETURN(int64_t d, HashShell(c));
    return Shell{kernels::SpotlightHashWeights{}, [d](ModelWeights& m, const Visitor& v) {
                   VisitHash(std::get<kernels::SpotlightHashWeights>(m), d, v);
                 }};
  }
  if (kind == "mlp" || kind == "cnn") {
    // Small models: the zoo builds the (zero) parameter vector, whose
    // param_infos are the layout; the weights stay a TensorSet.
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, MakeZooModel(kind, c, max_elements));
    TensorSet shell;
    for (const ParamInfo& p : model->param_infos()) shell.push_back({p.name, Tensor()});
    std::vector<std::vector<int64_t>> shapes;
    for (const ParamInfo& p : model->param_infos()) shapes.push_back(p.shape);
    return Shell{std::move(shell), [shapes](ModelWeights& m, const Visitor& v) {
                   TensorSet& set = std::get<TensorSet>(m);
                   for (size_t i = 0; i < set.size(); ++i) v(set[i].name, &set[i].value, shapes[i]);
                 }};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model kind '", kind, "' (known: ", absl::StrJoin(ModelKinds(), ", "), ")"));
}

absl::Status CheckFinite(const NamedTensor& t) {
  const absl::Span<const float> d = t.value.data();
  if (AllFinite(d)) return absl::OkStatus();
  for (size_t i = 0; i < d.size(); ++i) {
    if (!std::isfinite(d[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("model tensor '", t.name, "' holds NaN or infinity at ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckElements(const std::vector<TensorLayout>& layout, int64_t max_elements) {
  double total = 0;
  for (const TensorLayout& l : layout) {
    double n = 1;
    for (int64_t d : l.shape) n *= static_cast<double>(d);
    total += n;
  }
  if (total > static_cast<double>(max_elements)) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory: the model has ", total,
                                                     " float32 values, the cap is ", max_elements));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ModelKinds() {
  return {"cnn", "mlp", "ren", "spotlight.hash", "tensors", "trajmamba.encoder", "trajmamba.mask"};
}

absl::StatusOr<std::vector<TensorLayout>> ModelLayout(absl::string_view kind,
                                                      const ModelConfig& config,
                                                      int64_t max_elements) {
  if (kind == "tensors") {
    if (!config.empty()) return absl::InvalidArgumentError("model kind tensors takes no config");
    return std::vector<TensorLayout>{};
  }
  TANDEM_ASSIGN_OR_RETURN(Shell shell, MakeShell(kind, config, max_elements));
  std::vector<TensorLayout> out;
  shell.visit(shell.weights, [&](const std::string& name, Tensor*, std::vector<int64_t> shape) {
    out.push_back({name, std::move(shape)});
  });
  TANDEM_RETURN_IF_ERROR(CheckElements(out, max_elements));
  return out;
}

absl::StatusOr<ModelWeights> BuildModelWeights(absl::string_view kind, const ModelConfig& config,
                                               TensorSet tensors, int64_t max_elements) {
  for (const NamedTensor& t : tensors) TANDEM_RETURN_IF_ERROR(CheckFinite(t));
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name.empty()) return absl::InvalidArgumentError("model tensor without a name");
    if (!by_name.emplace(tensors[i].name, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("model tensor '", tensors[i].name, "' sent twice"));
    }
  }
  if (kind == "tensors") {
    if (!config.empty()) return absl::InvalidArgumentError("model kind tensors takes no config");
    std::vector<TensorLayout> layout;
    for (const NamedTensor& t : tensors) layout.push_back({t.name, t.value.shape()});
    TANDEM_RETURN_IF_ERROR(CheckElements(layout, max_elements));
    return ModelWeights(std::move(tensors));
  }
  TANDEM_RETURN_IF_ERROR(ModelLayout(kind, config, max_elements).status());
  TANDEM_ASSIGN_OR_RETURN(Shell shell, MakeShell(kind, config, max_elements));
  absl::Status status;
  std::set<std::string> used;
  shell.visit(
      shell.weights, [&](const std::string& name, Tensor* slot, std::vector<int64_t> shape) {
        if (!status.ok()) return;
        auto it = by_name.find(name);
        if (it == by_name.end()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("model kind ", kind, " needs tensor '", name, "'"));
          return;
        }
        Tensor& t = tensors[it->second].value;
        if (t.shape() != shape) {
          status = absl::InvalidArgumentError(
              absl::StrCat("model tensor '", name, "' has shape ", t.ShapeString(), ", kind ", kind,
                           " with this config expects (", absl::StrJoin(shape, ", "), ")"));
          return;
        }
        *slot = std::move(t);
        used.insert(name);
      });
  TANDEM_RETURN_IF_ERROR(status);
  for (const auto& [name, i] : by_name) {
    if (!used.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model kind ", kind, " has no tensor '", name, "'"));
    }
  }
  // The libraries' own checks, as the kernels will run them.
  if (auto* r = std::get_if<kernels::RenWeights>(&shell.weights)) {
    TANDEM_RETURN_IF_ERROR(kernels::ValidateRenWeights(*r));
  } else if (auto* t = std::get_if<s::TrajMambaWeights>(&shell.weights)) {
    TANDEM_RETURN_IF_ERROR(s::ValidateTrajMambaWeights(*t));
  } else if (auto* h = std::get_if<kernels::SpotlightHashWeights>(&shell.weights)) {
    TANDEM_RETURN_IF_ERROR(kernels::ValidateHashWeights(*h));
  }
  return std::move(shell.weights);
}

void ForEachModelTensor(const ModelWeights& weights,
                        absl::FunctionRef<void(const std::string&, const Tensor&)> fn) {
  if (const auto* set = std::get_if<TensorSet>(&weights)) {
    for (const NamedTensor& t : *set) fn(t.name, t.value);
    return;
  }
  // The visitors hand out mutable slots (BuildModelWeights fills them);
  // `visit` only reads from them.
  ModelWeights& w = const_cast<ModelWeights&>(weights);
  const Visitor visit = [&](const std::string& name, Tensor* t, std::vector<int64_t>) {
    fn(name, *t);
  };
  if (auto* r = std::get_if<kernels::RenWeights>(&w)) {
    VisitRen(*r, visit);
  } else if (auto* t = std::get_if<s::TrajMambaWeights>(&w)) {
    VisitTrajMamba(*t, visit);
  } else if (auto* m = std::get_if<s::MaskGeneratorWeights>(&w)) {
    VisitMask(*m, m->w1.dim(0), m->w1.dim(1), visit);
  } else if (auto* h = std::get_if<kernels::SpotlightHashWeights>(&w)) {
    VisitHash(*h, h->dim(), visit);
  }
}

TensorSet ModelTensors(const ModelWeights& weights) {
  TensorSet out;
  ForEachModelTensor(weights, [&](const std::string& name, const Tensor& t) {
    // A copy of a large model tensor would otherwise fault in 4 KiB pages.
    std::vector<float> values = AdvisedFloats(static_cast<size_t>(t.size()));
    std::copy(t.data().begin(), t.data().end(), values.begin());
    out.push_back({name, *Tensor::FromData(t.shape(), std::move(values))});
  });
  return out;
}

int64_t ModelWeightBytes(const ModelWeights& weights) {
  int64_t n = 0;
  ForEachModelTensor(weights, [&](const std::string&, const Tensor& t) { n += t.size(); });
  return n * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<std::unique_ptr<Model>> MakeZooModel(absl::string_view kind,
                                                    const ModelConfig& config,
                                                    int64_t max_elements) {
  auto cap = [&](double params) {
    return params <= static_cast<double>(max_elements)
               ? absl::OkStatus()
               : absl::ResourceExhaustedError(absl::StrCat("out of memory: the model has ", params,
                                                           " parameters, the cap is ",
                                                           max_elements));
  };
  if (kind == "cnn") {
    TANDEM_RETURN_IF_ERROR(CheckConfig(
        kind, config, {"channels", "height", "width", "classes", "conv1", "conv2", "hidden"}));
    auto at = [&](const char* k) { return static_cast<double>(config.at(k)); };
    const double pooled = static_cast<double>((config.at("height") / 4) * (config.at("width") / 4));
    TANDEM_RETURN_IF_ERROR(
        cap(at("conv1") * (at("channels") * 9 + 1) + at("conv2") * (at("conv1") * 9 + 1) +
            at("hidden") * (at("conv2") * pooled + 1) + at("classes") * (at("hidden") + 1)));
    return MakeCnn({config.at("channels"), config.at("height"), config.at("width")},
                   config.at("classes"),
                   {.conv1_channels = config.at("conv1"),
                    .conv2_channels = config.at("conv2"),
                    .hidden = config.at("hidden")});
  }
  if (kind == "mlp") {
    const auto layers = config.find("hidden_layers");
    if (layers == config.end() || layers->second < 0 || layers->second > kMaxLayers) {
      return absl::InvalidArgumentError(
          absl::StrCat("model kind mlp needs config 'hidden_layers' in [0, ", kMaxLayers, "]"));
    }
    std::vector<std::string> keys = {"in", "classes", "hidden_layers"};
    for (int64_t i = 0; i < layers->second; ++i) keys.push_back(absl::StrCat("hidden", i));
    ModelConfig checked = config;
    if (layers->second == 0) checked.erase("hidden_layers");  // 0 is valid here
    if (layers->second == 0) keys.erase(keys.begin() + 2);
    TANDEM_RETURN_IF_ERROR(CheckConfig(kind, checked, keys));
    std::vector<int64_t> hidden;
    double params = 0, prev = static_cast<double>(config.at("in"));
    for (int64_t i = 0; i < layers->second; ++i) {
      hidden.push_back(config.at(absl::StrCat("hidden", i)));
      params += (prev + 1) * static_cast<double>(hidden.back());
      prev = static_cast<double>(hidden.back());
    }
    TANDEM_RETURN_IF_ERROR(cap(params + (prev + 1) * static_cast<double>(config.at("classes"))));
    return MakeMlp(config.at("in"), hidden, config.at("classes"));
  }
  return absl::InvalidArgumentError(absl::StrCat("'", kind, "' is not a zoo model kind"));
}

TensorSet ZooModelTensors(const Model& model) {
  TensorSet out;
  const absl::Span<const float> flat = model.params();
  for (const ParamInfo& p : model.param_infos()) {
    std::vector<float> v(flat.begin() + p.offset, flat.begin() + p.offset + p.size);
    out.push_back({p.name, *Tensor::FromData(p.shape, std::move(v))});
  }
  return out;
}

}  // namespace tandem::ml::worker
