#include "ml/model/model.h"

#include <cmath>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::ml {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(
    std::vector<std::unique_ptr<Layer>> layers) {
  if (layers.empty()) return absl::InvalidArgumentError("model: no layers");
  std::set<std::string> names;
  std::vector<std::shared_ptr<const Layer>> shared;
  std::vector<ParamInfo> infos;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("model: layer ", i, " is null"));
    }
    const Layer& l = *layers[i];
    if (!names.insert(l.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("model: duplicate layer name '", l.name(), "'"));
    }
    if (i > 0 && shared.back()->out_size() != l.in_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model: layer '", shared.back()->name(), "' outputs ", shared.back()->out_size(),
          " features but '", l.name(), "' expects ", l.in_size()));
    }
    offsets.push_back(offset);
    for (const ParamSpec& p : l.params()) {
      infos.push_back({absl::StrCat(l.name(), ".", p.name), l.name(), p.kind, p.shape, offset,
                       p.size()});
      offset += p.size();
    }
    shared.push_back(std::shared_ptr<const Layer>(std::move(layers[i])));
  }
  offsets.push_back(offset);
  return std::unique_ptr<Model>(
      new Model(std::move(shared), std::move(infos), std::move(offsets), offset));
}

Model::Model(std::vector<std::shared_ptr<const Layer>> layers, std::vector<ParamInfo> infos,
             std::vector<int64_t> layer_offsets, int64_t total)
    : layers_(std::move(layers)),
      infos_(std::move(infos)),
      layer_offsets_(std::move(layer_offsets)),
      params_(static_cast<size_t>(total), 0.0f) {}

std::unique_ptr<Model> Model::Clone() const {
  auto copy = std::unique_ptr<Model>(
      new Model(layers_, infos_, layer_offsets_, static_cast<int64_t>(params_.size())));
  copy->params_ = params_;
  return copy;
}

void Model::Init(absl::BitGenRef gen) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->Init(absl::MakeSpan(params_).subspan(layer_offsets_[i],
                                                     layer_offsets_[i + 1] - layer_offsets_[i]),
                     gen);
  }
}

void Model::InitFromSeed(uint64_t seed) {
  std::mt19937_64 gen(seed);
  Init(gen);
}

absl::Status Model::SetParams(absl::Span<const float> flat) {
  if (flat.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model: parameter vector has ", flat.size(),
                                                   " values, model needs ", params_.size()));
  }
  for (size_t i = 0; i < flat.size(); ++i) {
    if (!std::isfinite(flat[i])) {
      return absl::InvalidArgumentError(absl::StrCat("model: parameter ", i, " is not finite"));
    }
  }
  params_.assign(flat.begin(), flat.end());
  return absl::OkStatus();
}

std::string Model::Fingerprint() const {
  std::vector<std::string> parts;
  for (const auto& l : layers_) {
    std::vector<std::string> tensors;
    for (const ParamSpec& p : l->params()) {
      tensors.push_back(absl::StrCat(p.name, "[", absl::StrJoin(p.shape, "x"), "]"));
    }
    parts.push_back(absl::StrCat(l->name(), ":", l->type(), "(", l->config(), ")",
                                 absl::StrJoin(tensors, ",")));
  }
  return absl::StrJoin(parts, ";");
}

absl::Span<const float> Model::LayerSlice(size_t i, absl::Span<const float> all) const {
  return all.subspan(layer_offsets_[i], layer_offsets_[i + 1] - layer_offsets_[i]);
}

absl::Status Model::Forward(const Matrix& in, Activations* acts) const {
  if (in.cols() != input_size()) {
    return absl::InvalidArgumentError(absl::StrCat("model: input has ", in.cols(),
                                                   " features, expected ", input_size()));
  }
  acts->input = in;
  acts->outputs.resize(layers_.size());
  const Matrix* x = &acts->input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (absl::Status s = layers_[i]->Forward(LayerSlice(i, params_), *x, &acts->outputs[i]);
        !s.ok()) {
      return s;
    }
    x = &acts->outputs[i];
  }
  return absl::OkStatus();
}

absl::Status Model::Backward(const Activations& acts, const Matrix& grad_logits,
                             absl::Span<float> grad) const {
  if (grad.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model: gradient has ", grad.size(),
                                                   " values, expected ", params_.size()));
  }
  if (acts.outputs.size() != layers_.size() || grad_logits.rows() != acts.input.rows() ||
      grad_logits.cols() != output_size()) {
    return absl::InvalidArgumentError("model: activations/gradient do not match the model");
  }
  // Per-thread scratch keeps the (large) gradient buffers allocated across
  // calls; Backward stays safe to run concurrently from several threads.
  thread_local Matrix g, g_in;
  g = grad_logits;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Matrix& in = i == 0 ? acts.input : acts.outputs[i - 1];
    layers_[i]->Backward(LayerSlice(i, params_), in, acts.outputs[i], g, i == 0 ? nullptr : &g_in,
                         grad.subspan(layer_offsets_[i], layer_offsets_[i + 1] - layer_offsets_[i]));
    if (i > 0) std::swap(g, g_in);
  }
  return absl::OkStatus();
}

absl::StatusOr<Matrix> Model::Predict(const Matrix& in) const {
  Activations acts;
  if (absl::Status s = Forward(in, &acts); !s.ok()) return s;
  return std::move(acts.outputs.back());
}

void AppendNamedTensor(std::vector<ParamInfo>& layout, std::string name,
                       std::vector<int64_t> shape) {
  ParamInfo p;
  p.layer = name;
  p.name = std::move(name);
  p.kind = shape.size() > 1 ? ParamKind::kWeight : ParamKind::kBias;
  p.offset = layout.empty() ? 0 : layout.back().offset + layout.back().size;
  p.size = 1;
  for (int64_t d : shape) p.size *= d;
  p.shape = std::move(shape);
  layout.push_back(std::move(p));
}

}  // namespace tandem::ml
