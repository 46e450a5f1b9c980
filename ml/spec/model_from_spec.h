// The tandem-native model a proto::ModelSpec describes (issue 33 item 4):
// the MLP (input_dim, hidden, num_classes) or a layer list over an input
// shape (layers, input_shape), built the same way by the coordinator (its
// FedLUAR layout, its held-out evaluation) and by the C++ SDK on device, so
// that both agree on every parameter's place in the flat vector. The one ml
// library that reads proto messages (ml/ itself does not link proto).
//
// Layer names are the kind and its 1-based position ("conv2d1", "relu2",
// ...; "out" for the last), so a released model's tensors read
// "conv2d1.weight", "out.bias" in safetensors.
// Thread safety: pure functions.
#ifndef TANDEM_ML_SPEC_MODEL_FROM_SPEC_H_
#define TANDEM_ML_SPEC_MODEL_FROM_SPEC_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/model.h"
#include "proto/coordinator.pb.h"

namespace tandem::ml {

// Largest native model (parameters), and largest activation per example, a
// spec may describe: what a device is asked to train stays bounded.
inline constexpr int64_t kMaxNativeParams = int64_t{1} << 26;
inline constexpr int64_t kMaxNativeActivation = int64_t{1} << 24;
inline constexpr int kMaxNativeLayers = 64;

// INVALID_ARGUMENT naming the field ("model.layers[3] (dense): ...") when the
// spec is neither an MLP nor a layer list, a kind is unknown, a size is out
// of range, shapes do not chain (conv2d/pooling need an image input, dense a
// flat one: put "flatten" between), the last layer's width is not
// num_classes, input_dim is not the product of input_shape, or the model is
// larger than the bounds above. Parameters are zero until Model::Init().
absl::StatusOr<std::unique_ptr<Model>> ModelFromSpec(const proto::ModelSpec& spec);

// The parameters of a layer list, checked as ModelFromSpec checks it but
// without allocating them (a device bounds what it downloads first).
absl::StatusOr<int64_t> NativeParamCount(const proto::ModelSpec& spec);

// An opaque model's example shape as a task states it (TaskModelSpec /
// ModelSpec input_shape): 1 to 4 dimensions, each in [1, 2^24], at most
// 2^24 values, or none. INVALID_ARGUMENT naming "model.input_shape" (and
// the dimension) otherwise. The coordinator checks it when a task is
// created, a device again when it is assigned one.
absl::Status CheckOpaqueInputShape(absl::Span<const int64_t> shape);

// Whether the spec describes a layer list (not the MLP, not opaque).
inline bool IsLayered(const proto::ModelSpec& spec) { return spec.layers_size() > 0; }

}  // namespace tandem::ml

#endif  // TANDEM_ML_SPEC_MODEL_FROM_SPEC_H_
