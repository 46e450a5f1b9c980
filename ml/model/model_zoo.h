// Ready-made architectures used by tandem-train, the benchmarks and tests.
#ifndef TANDEM_ML_MODEL_MODEL_ZOO_H_
#define TANDEM_ML_MODEL_MODEL_ZOO_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/model/basic_layers.h"
#include "ml/model/conv_layers.h"
#include "ml/model/model.h"

namespace tandem::ml {

// dense(in->h1) act [dense(h1->h2) act ...] dense(->classes). Layer names:
// fc1, act1, fc2, act2, ..., out. Parameters are zero until Init().
// Returns INVALID_ARGUMENT for non-positive sizes.
absl::StatusOr<std::unique_ptr<Model>> MakeMlp(int64_t in, const std::vector<int64_t>& hidden,
                                               int64_t classes, Activation act = Activation::kRelu);

struct CnnOptions {
  int64_t conv1_channels = 32;
  int64_t conv2_channels = 64;
  int64_t hidden = 128;
};

// conv1(3x3, pad 1) relu maxpool(2) conv2(3x3, pad 1) relu maxpool(2)
// fc(hidden) relu out(classes): the usual small Fashion-MNIST CNN. Built as
// conv maxpool relu (same function and gradients, cheaper; layers conv1
// pool1 relu1 conv2 pool2 relu2 fc1 relu3 out).
// Returns INVALID_ARGUMENT for bad shapes (e.g. images smaller than 4x4).
absl::StatusOr<std::unique_ptr<Model>> MakeCnn(ImageShape in, int64_t classes,
                                               const CnnOptions& options = {});

// Approximate forward multiply-adds per sample x 2 (FLOPs) of the dense and
// conv layers; training costs about 3x this.
double ForwardFlopsPerSample(const Model& model);

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_MODEL_ZOO_H_
