#include "ml/worker/zoo_kernels.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "ml/train/trainer.h"
#include "ml/worker/kernel_spec_helpers.h"
#include "ml/worker/model_kinds.h"
#include "ml/worker/model_store.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;

// The leased model as an ml::Model with its weights (one copy of the
// parameters; the zoo builds the layers from the kind and config, which the
// store validated at load time).
absl::StatusOr<std::unique_ptr<Model>> BuildHeldModel(const KernelCall& c) {
  const LoadedModel& held = c.model->model();
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      MakeZooModel(held.kind, held.config, std::numeric_limits<int64_t>::max()));
  const auto* tensors = std::get_if<TensorSet>(&held.weights);
  if (tensors == nullptr) return absl::InternalError("zoo model without a tensor set");
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(model->num_params()));
  for (const NamedTensor& t : *tensors) {
    flat.insert(flat.end(), t.value.data().begin(), t.value.data().end());
  }
  TANDEM_RETURN_IF_ERROR(model->SetParams(flat));
  return model;
}

// features [n, d] as a row-major Matrix after checking d against the model.
absl::StatusOr<Matrix> Features(const Tensor& x, const Model& model, const char* kernel) {
  if (x.dim(0) < 1 || x.dim(1) != model.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": features ", x.ShapeString(),
                                                   " do not fit the model's input of ",
                                                   model.input_size(), " (need [n >= 1, ",
                                                   model.input_size(), "])"));
  }
  TANDEM_RETURN_IF_ERROR(Budget(2.0 * Dim(x, 0) * static_cast<double>(model.num_params()),
                                kMaxWork, "forward FLOPs"));
  return Matrix(ConstMatrixMap(x.data().data(), x.dim(0), x.dim(1)));
}

absl::StatusOr<Outputs> Evaluate(const KernelCall& c) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildHeldModel(c));
  Dataset data;
  TANDEM_ASSIGN_OR_RETURN(data.features, Features(c.f32(0), *model, "model.evaluate"));
  const Tensor& labels = c.f32(1);
  if (labels.dim(0) != data.features.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("model.evaluate: ", labels.dim(0),
                                                   " labels for ", data.features.rows(),
                                                   " examples"));
  }
  const int64_t classes = model->output_size();
  data.labels.reserve(static_cast<size_t>(labels.dim(0)));
  for (int64_t i = 0; i < labels.dim(0); ++i) {
    const float l = labels.data()[static_cast<size_t>(i)];
    if (!(l >= 0) || l >= static_cast<float>(classes) || l != std::floor(l)) {
      return absl::InvalidArgumentError(absl::StrCat("model.evaluate: label ", i, " is ", l,
                                                     ", not a class index in [0, ", classes,
                                                     ")"));
    }
    data.labels.push_back(static_cast<int>(l));
  }
  data.num_classes = static_cast<int>(classes);
  data.shape = {1, 1, data.features.cols()};
  // One thread: the worker runs calls concurrently; chunking as the
  // coordinator's in-process evaluation, so the figures are the same.
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GradientEngine> engine, GradientEngine::Create(1));
  TANDEM_ASSIGN_OR_RETURN(EvalStats e, engine->Evaluate(*model, data));
  const double n = static_cast<double>(data.size());
  const double correct = std::round(e.accuracy * n);
  TANDEM_ASSIGN_OR_RETURN(
      Tensor stats, Tensor::FromData({3}, {static_cast<float>(e.loss), static_cast<float>(correct),
                                           static_cast<float>(n)}));
  return MoveOutputs(EncodeFloat("stats", stats));
}

absl::StatusOr<Outputs> Predict(const KernelCall& c) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildHeldModel(c));
  TANDEM_ASSIGN_OR_RETURN(Matrix x, Features(c.f32(0), *model, "model.predict"));
  TANDEM_ASSIGN_OR_RETURN(Matrix logits, model->Predict(x));
  std::vector<float> out(logits.data(), logits.data() + logits.size());
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromData({logits.rows(), logits.cols()},
                                                      std::move(out)));
  return MoveOutputs(EncodeFloat("logits", t));
}

}  // namespace

absl::Status RegisterZooKernels(KernelRegistry* registry) {
  TANDEM_RETURN_IF_ERROR(registry->Register(
      {"model.evaluate",
       "held-out mean cross-entropy and accuracy of a loaded mlp/cnn model (the federation's "
       "global model): stats = {loss, correct, n}",
       false,
       {{"features", kF32, 2}, {"labels", kF32, 1}},
       {},
       {{"stats", kF32, 1}},
       Evaluate,
       {"cnn", "mlp"},
       true,
       false}));
  return registry->Register({"model.predict",
                             "serving: logits of a loaded mlp/cnn model for a batch of inputs",
                             false,
                             {{"features", kF32, 2}},
                             {},
                             {{"logits", kF32, 2}},
                             Predict,
                             {"cnn", "mlp"},
                             true,
                             false});
}

}  // namespace tandem::ml::worker
