#include "ml/spec/model_from_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/model/basic_layers.h"
#include "ml/model/conv_layers.h"
#include "ml/model/embedding_bag.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

// The shape between two layers: an image, or flat features.
struct Shape {
  bool image = false;
  ImageShape img;
  int64_t flat = 0;
  int64_t size() const { return image ? img.size() : flat; }
};

absl::Status Bad(int index, const std::string& kind, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("model.layers[", index, "] (", kind, "): ", why));
}

absl::StatusOr<std::unique_ptr<Layer>> Build(const proto::LayerSpec& l, int index, bool last,
                                             Shape* shape) {
  const std::string& kind = l.kind();
  const std::string name = last ? "out" : absl::StrCat(kind, index + 1);
  auto fail = [&](const absl::Status& s) { return Bad(index, kind, std::string(s.message())); };
  if (kind == "dense") {
    if (shape->image) return Bad(index, kind, "needs flat features: add a \"flatten\" before it");
    if (l.units() < 1 || l.units() > (int64_t{1} << 20)) {
      return Bad(index, kind, "units must be in [1, 2^20]");
    }
    auto layer = DenseLayer::Create(name, shape->flat, l.units());
    if (!layer.ok()) return fail(layer.status());
    shape->flat = l.units();
    return std::unique_ptr<Layer>(*std::move(layer));
  }
  if (kind == "conv2d" || kind == "max_pool" || kind == "avg_pool") {
    if (!shape->image) return Bad(index, kind, "needs an image input ([C, H, W])");
    const bool conv = kind == "conv2d";
    const int64_t k = l.kernel() != 0 ? l.kernel() : (conv ? 3 : 2);
    const int64_t stride = l.stride() != 0 ? l.stride() : (conv ? 1 : k);
    if (k < 1 || k > 64 || stride < 1 || stride > 64 || l.padding() < 0 || l.padding() > 64) {
      return Bad(index, kind, "kernel and stride must be in [1, 64], padding in [0, 64]");
    }
    if (conv) {
      if (l.units() < 1 || l.units() > 4096) return Bad(index, kind, "units must be in [1, 4096]");
      auto layer = Conv2DLayer::Create(
          name, shape->img,
          {.out_channels = l.units(), .kernel = k, .stride = stride, .padding = l.padding()});
      if (!layer.ok()) return fail(layer.status());
      shape->img = (*layer)->out_shape();
      return std::unique_ptr<Layer>(*std::move(layer));
    }
    if (l.padding() != 0) return Bad(index, kind, "pooling takes no padding");
    auto layer = Pool2DLayer::Create(name, kind == "max_pool" ? PoolKind::kMax : PoolKind::kAverage,
                                     shape->img, k, stride);
    if (!layer.ok()) return fail(layer.status());
    shape->img = (*layer)->out_shape();
    return std::unique_ptr<Layer>(*std::move(layer));
  }
  if (kind == "relu" || kind == "gelu") {
    auto layer = ActivationLayer::Create(
        name, kind == "relu" ? Activation::kRelu : Activation::kGelu, shape->size());
    if (!layer.ok()) return fail(layer.status());
    return std::unique_ptr<Layer>(*std::move(layer));
  }
  if (kind == "layer_norm") {
    if (shape->image) return Bad(index, kind, "normalizes flat features: add a \"flatten\" first");
    auto layer = LayerNormLayer::Create(name, shape->flat);
    if (!layer.ok()) return fail(layer.status());
    return std::unique_ptr<Layer>(*std::move(layer));
  }
  if (kind == "embedding_bag") {
    if (index != 0 || shape->image) {
      return Bad(index, kind,
                 "reads the example's token ids: it must be the first layer over [ids]");
    }
    if (l.vocab() < 1 || l.vocab() > (int64_t{1} << 24) || l.units() < 1 || l.units() > 4096) {
      return Bad(index, kind, "vocab must be in [1, 2^24], units in [1, 4096]");
    }
    auto layer = EmbeddingBagLayer::Create(name, l.vocab(), l.units(), shape->flat);
    if (!layer.ok()) return fail(layer.status());
    shape->flat = l.units();
    return std::unique_ptr<Layer>(*std::move(layer));
  }
  return Bad(index, kind,
             "unknown kind (dense, conv2d, max_pool, avg_pool, relu, gelu, layer_norm, "
             "embedding_bag, flatten)");
}

// The layers of a layer list, checked, and their parameter count.
absl::StatusOr<std::vector<std::unique_ptr<Layer>>> Layered(const proto::ModelSpec& spec,
                                                            int64_t* num_params) {
  if (spec.hidden_size() > 0 || spec.tensors_size() > 0) {
    return absl::InvalidArgumentError("model: layers, hidden and tensors are exclusive");
  }
  if (spec.layers_size() > kMaxNativeLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.layers: at most ", kMaxNativeLayers, " layers"));
  }
  Shape shape;
  const auto& in = spec.input_shape();
  for (int64_t d : in) {
    if (d < 1 || d > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError("model.input_shape: every dimension must be in [1, 2^24]");
    }
  }
  if (in.size() == 3) {
    shape.image = true;
    shape.img = {in[0], in[1], in[2]};
  } else if (in.size() == 1) {
    shape.flat = in[0];
  } else {
    return absl::InvalidArgumentError("model.input_shape: [channels, height, width] or [features]");
  }
  if (shape.size() > kMaxNativeActivation || spec.input_dim() != shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.input_dim: must be the product of input_shape (", shape.size(), ")"));
  }
  // The last layer with parameters is the output; trailing layers after it
  // (an activation on the logits) are refused below by the width check.
  int last_param = -1;
  for (int i = 0; i < spec.layers_size(); ++i) {
    const std::string& k = spec.layers(i).kind();
    if (k == "dense" || k == "conv2d" || k == "embedding_bag") last_param = i;
  }
  std::vector<std::unique_ptr<Layer>> layers;
  int64_t params = 0;
  for (int i = 0; i < spec.layers_size(); ++i) {
    const proto::LayerSpec& l = spec.layers(i);
    if (l.kind() == "flatten") {
      // An example is already one row of C*H*W values: only the shape
      // bookkeeping changes, no layer is added.
      if (!shape.image) return Bad(i, "flatten", "the input is already flat");
      shape = {.image = false, .img = {}, .flat = shape.img.size()};
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, Build(l, i, i == last_param, &shape));
    for (const ParamSpec& p : layer->params()) params += p.size();
    if (shape.size() > kMaxNativeActivation || params > kMaxNativeParams) {
      return Bad(i, l.kind(),
                 "the model grows past the native bounds (2^24 activations per "
                 "example, 2^26 parameters)");
    }
    layers.push_back(std::move(layer));
  }
  if (last_param < 0) return absl::InvalidArgumentError("model.layers: no layer has parameters");
  if (shape.image || shape.flat != spec.num_classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers: the last layer's output (", shape.size(), shape.image ? ", an image" : "",
        ") must be the num_classes (", spec.num_classes(), ") logits"));
  }
  *num_params = params;
  return layers;
}

absl::Status CheckClasses(const proto::ModelSpec& spec) {
  if (spec.num_classes() < 2 || spec.num_classes() > 100000) {
    return absl::InvalidArgumentError("model.num_classes: must be in [2, 100000]");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> NativeParamCount(const proto::ModelSpec& spec) {
  if (!IsLayered(spec)) return absl::InvalidArgumentError("model.layers: not a layer list");
  TANDEM_RETURN_IF_ERROR(CheckClasses(spec));
  int64_t params = 0;
  TANDEM_RETURN_IF_ERROR(Layered(spec, &params).status());
  return params;
}

absl::StatusOr<std::unique_ptr<Model>> ModelFromSpec(const proto::ModelSpec& spec) {
  TANDEM_RETURN_IF_ERROR(CheckClasses(spec));
  if (IsLayered(spec)) {
    int64_t params = 0;
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Layer>> layers, Layered(spec, &params));
    return Model::Create(std::move(layers));
  }
  if (spec.tensors_size() > 0) {
    return absl::InvalidArgumentError("model: an opaque model is trained by the app's framework");
  }
  const std::vector<int64_t> hidden(spec.hidden().begin(), spec.hidden().end());
  return MakeMlp(spec.input_dim(), hidden, spec.num_classes());
}

absl::Status CheckOpaqueInputShape(absl::Span<const int64_t> shape) {
  if (shape.size() > 4) {
    return absl::InvalidArgumentError("model.input_shape: 1 to 4 dimensions (e.g. [1, 28, 28])");
  }
  int64_t values = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1 || shape[i] > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.input_shape[", i, "]: must be in [1, 2^24]"));
    }
    values *= shape[i];  // <= 2^24 * 2^24: no overflow before the check
    if (values > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError("model.input_shape: an example of more than 2^24 values");
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml
