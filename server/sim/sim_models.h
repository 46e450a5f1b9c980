// The models a simulated federation trains (tandem-sim --model), built from
// ml/model layers. The coordinator daemon (server/) serves MLPs only
// (proto ModelSpec); the CNNs run in tandem-sim's in-process path, where the
// simulator is the coordinator and the aggregators are the real daemons.
#ifndef TANDEM_SERVER_SIM_SIM_MODELS_H_
#define TANDEM_SERVER_SIM_SIM_MODELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/model/model.h"

namespace tandem::sim {

// "mlp": dense layers of `hidden` widths (ml::MakeMlp).
// "cnn": ml::MakeCnn's small Fashion-MNIST CNN (4 weight tensors).
// "deep_cnn": 8 weight tensors (16 with biases), for FedLUAR's many-layer
//   regime (Kim, Kang & Lee 2025 recycle a few of tens of layers):
//   conv1(8) conv2(8) pool conv3(16) conv4(16) pool conv5(16) conv6(16)
//   fc1(32) out, 3x3 convolutions with padding 1, ReLU after every conv and
//   fc1, 2x2 max pooling; 34,242 parameters on 28x28 images.
// Images are square with one channel: `features` = side * side.
// INVALID_ARGUMENT for an unknown name or, for the CNNs, a feature count
// that is not a square of side >= 8.
absl::StatusOr<std::unique_ptr<ml::Model>> MakeSimModel(const std::string& name,
                                                        int64_t features,
                                                        const std::vector<int64_t>& hidden,
                                                        int64_t classes);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_SIM_MODELS_H_
