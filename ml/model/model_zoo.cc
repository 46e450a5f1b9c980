#include "ml/model/model_zoo.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml {

absl::StatusOr<std::unique_ptr<Model>> MakeMlp(int64_t in, const std::vector<int64_t>& hidden,
                                               int64_t classes, Activation act) {
  std::vector<std::unique_ptr<Layer>> layers;
  int64_t prev = in;
  for (size_t i = 0; i < hidden.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(auto fc,
                            DenseLayer::Create(absl::StrCat("fc", i + 1), prev, hidden[i]));
    layers.push_back(std::move(fc));
    TANDEM_ASSIGN_OR_RETURN(auto a,
                            ActivationLayer::Create(absl::StrCat("act", i + 1), act, hidden[i]));
    layers.push_back(std::move(a));
    prev = hidden[i];
  }
  TANDEM_ASSIGN_OR_RETURN(auto out, DenseLayer::Create("out", prev, classes));
  layers.push_back(std::move(out));
  return Model::Create(std::move(layers));
}

absl::StatusOr<std::unique_ptr<Model>> MakeCnn(ImageShape in, int64_t classes,
                                               const CnnOptions& o) {
  std::vector<std::unique_ptr<Layer>> layers;
  TANDEM_ASSIGN_OR_RETURN(auto c1, Conv2DLayer::Create("conv1", in, {o.conv1_channels, 3, 1, 1}));
  ImageShape s = c1->out_shape();
  layers.push_back(std::move(c1));
  // Max-pool before ReLU: relu(maxpool(x)) == maxpool(relu(x)) (ReLU is
  // monotone), and the gradients agree too (a window whose maximum is <= 0
  // gets zero gradient either way), but the ReLU and its backward then touch
  // a quarter of the elements.
  TANDEM_ASSIGN_OR_RETURN(auto p1, Pool2DLayer::Create("pool1", PoolKind::kMax, s, 2, 2));
  s = p1->out_shape();
  layers.push_back(std::move(p1));
  TANDEM_ASSIGN_OR_RETURN(auto r1, ActivationLayer::Create("relu1", Activation::kRelu, s.size()));
  layers.push_back(std::move(r1));
  TANDEM_ASSIGN_OR_RETURN(auto c2, Conv2DLayer::Create("conv2", s, {o.conv2_channels, 3, 1, 1}));
  s = c2->out_shape();
  layers.push_back(std::move(c2));
  TANDEM_ASSIGN_OR_RETURN(auto p2, Pool2DLayer::Create("pool2", PoolKind::kMax, s, 2, 2));
  s = p2->out_shape();
  layers.push_back(std::move(p2));
  TANDEM_ASSIGN_OR_RETURN(auto r2, ActivationLayer::Create("relu2", Activation::kRelu, s.size()));
  layers.push_back(std::move(r2));
  TANDEM_ASSIGN_OR_RETURN(auto fc, DenseLayer::Create("fc1", s.size(), o.hidden));
  layers.push_back(std::move(fc));
  TANDEM_ASSIGN_OR_RETURN(auto r3, ActivationLayer::Create("relu3", Activation::kRelu, o.hidden));
  layers.push_back(std::move(r3));
  TANDEM_ASSIGN_OR_RETURN(auto out, DenseLayer::Create("out", o.hidden, classes));
  layers.push_back(std::move(out));
  return Model::Create(std::move(layers));
}

double ForwardFlopsPerSample(const Model& model) {
  double flops = 0.0;
  for (size_t i = 0; i < model.num_layers(); ++i) {
    const Layer& l = model.layer(i);
    if (l.type() == "dense") {
      flops += 2.0 * static_cast<double>(l.in_size()) * static_cast<double>(l.out_size());
    } else if (l.type() == "conv2d") {
      const auto specs = l.params();
      // weight [oc, fan_in]; output oc * pixels.
      const double fan_in = static_cast<double>(specs[0].shape[1]);
      flops += 2.0 * fan_in * static_cast<double>(l.out_size());
    }
  }
  return flops;
}

}  // namespace tandem::ml
