#include "server/sim/sim_models.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/model/basic_layers.h"
#include "ml/model/conv_layers.h"
#include "ml/model/model_zoo.h"

namespace tandem::sim {
namespace {

absl::StatusOr<ml::ImageShape> SquareImage(int64_t features) {
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(features))));
  if (side < 8 || side * side != features) {
    return absl::InvalidArgumentError(
        absl::StrCat("a CNN needs square one-channel images of side >= 8, got ", features,
                     " features"));
  }
  return ml::ImageShape{1, side, side};
}

// Appends conv(out_channels, 3x3, pad 1) and its ReLU; updates `shape`.
absl::Status AddConv(const std::string& name, int64_t out_channels, ml::ImageShape* shape,
                     std::vector<std::unique_ptr<ml::Layer>>* layers) {
  TANDEM_ASSIGN_OR_RETURN(auto conv,
                          ml::Conv2DLayer::Create(name, *shape, {out_channels, 3, 1, 1}));
  *shape = conv->out_shape();
  layers->push_back(std::move(conv));
  TANDEM_ASSIGN_OR_RETURN(auto relu, ml::ActivationLayer::Create(absl::StrCat(name, "_relu"),
                                                                 ml::Activation::kRelu,
                                                                 shape->size()));
  layers->push_back(std::move(relu));
  return absl::OkStatus();
}

absl::Status AddPool(const std::string& name, ml::ImageShape* shape,
                     std::vector<std::unique_ptr<ml::Layer>>* layers) {
  TANDEM_ASSIGN_OR_RETURN(auto pool,
                          ml::Pool2DLayer::Create(name, ml::PoolKind::kMax, *shape, 2, 2));
  *shape = pool->out_shape();
  layers->push_back(std::move(pool));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ml::Model>> MakeDeepCnn(ml::ImageShape s, int64_t classes) {
  std::vector<std::unique_ptr<ml::Layer>> layers;
  TANDEM_RETURN_IF_ERROR(AddConv("conv1", 8, &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddConv("conv2", 8, &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddPool("pool1", &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddConv("conv3", 16, &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddConv("conv4", 16, &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddPool("pool2", &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddConv("conv5", 16, &s, &layers));
  TANDEM_RETURN_IF_ERROR(AddConv("conv6", 16, &s, &layers));
  TANDEM_ASSIGN_OR_RETURN(auto fc, ml::DenseLayer::Create("fc1", s.size(), 32));
  layers.push_back(std::move(fc));
  TANDEM_ASSIGN_OR_RETURN(auto relu, ml::ActivationLayer::Create("fc1_relu",
                                                                 ml::Activation::kRelu, 32));
  layers.push_back(std::move(relu));
  TANDEM_ASSIGN_OR_RETURN(auto out, ml::DenseLayer::Create("out", 32, classes));
  layers.push_back(std::move(out));
  return ml::Model::Create(std::move(layers));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ml::Model>> MakeSimModel(const std::string& name,
                                                        int64_t features,
                                                        const std::vector<int64_t>& hidden,
                                                        int64_t classes) {
  if (name == "mlp") return ml::MakeMlp(features, hidden, classes);
  if (name == "cnn") {
    TANDEM_ASSIGN_OR_RETURN(ml::ImageShape s, SquareImage(features));
    return ml::MakeCnn(s, classes);
  }
  if (name == "deep_cnn") {
    TANDEM_ASSIGN_OR_RETURN(ml::ImageShape s, SquareImage(features));
    return MakeDeepCnn(s, classes);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model must be mlp, cnn or deep_cnn; got '", name, "'"));
}

}  // namespace tandem::sim
