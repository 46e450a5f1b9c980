#include "ml/worker/model_kernels.h"

#include <any>
#include <cmath>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/worker/kernel_spec_helpers.h"
#include "ml/worker/spotlight_params.h"

namespace tandem::ml::worker {
namespace {

namespace s = kernels::search;
using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;

Tensor Scalar(double x) { return *Tensor::FromData({}, {static_cast<float>(x)}); }

absl::Status CheckFinite(std::initializer_list<const Tensor*> ts, const char* what) {
  for (const Tensor* t : ts) {
    for (float v : t->data()) {
      if (!std::isfinite(v)) {
        return absl::OutOfRangeError(
            absl::StrCat(what, " produced NaN or infinity; the model is unchanged"));
      }
    }
  }
  return absl::OkStatus();
}

// The AdamW state of a "spotlight.hash" model: the trainer owns a copy of
// the weights and the moments; the options it was created with are fixed
// for the model's life (a step asking for others is refused rather than
// silently resetting the moments).
struct SpotlightState {
  kernels::SpotlightTrainer trainer;
  kernels::SpotlightLossOptions loss;
  kernels::AdamWOptions adam;
};

bool SameOptions(const SpotlightState& st, const kernels::SpotlightLossOptions& l,
                 const kernels::AdamWOptions& a) {
  return st.loss.gamma == l.gamma && st.loss.beta == l.beta && st.loss.margin == l.margin &&
         st.loss.top_fraction == l.top_fraction && st.loss.causal == l.causal &&
         st.adam.lr == a.lr && st.adam.beta1 == a.beta1 && st.adam.beta2 == a.beta2 &&
         st.adam.eps == a.eps && st.adam.weight_decay == a.weight_decay &&
         st.adam.clip_norm == a.clip_norm;
}

Outputs HashOutputs(double loss, const kernels::SpotlightHashWeights& w) {
  return {EncodeFloat("loss", Scalar(loss)), EncodeFloat("w1", w.w1), EncodeFloat("b1", w.b1),
          EncodeFloat("w2", w.w2), EncodeFloat("b2", w.b2)};
}

absl::StatusOr<Outputs> SpotlightTrainStep(const KernelCall& c) {
  TANDEM_RETURN_IF_ERROR(SpotlightLossBudget(c));
  const kernels::SpotlightLossOptions lo = SpotlightLossFrom(c);
  kernels::AdamWOptions ao;
  ao.lr = static_cast<float>(c.param("lr"));
  ao.beta1 = static_cast<float>(c.param("beta1"));
  ao.beta2 = static_cast<float>(c.param("beta2"));
  ao.eps = static_cast<float>(c.param("eps"));
  ao.weight_decay = static_cast<float>(c.param("weight_decay"));
  ao.clip_norm = static_cast<float>(c.param("clip_norm"));
  if (c.model == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(
        kernels::SpotlightTrainer t,
        kernels::SpotlightTrainer::Create({c.f32(2), c.f32(3), c.f32(4), c.f32(5)}, lo, ao));
    TANDEM_ASSIGN_OR_RETURN(double loss, t.Step(c.f32(0), c.f32(1)));
    return HashOutputs(loss, t.weights());
  }
  LoadedModel* m = c.model->mutable_model();
  auto& weights = std::get<kernels::SpotlightHashWeights>(m->weights);
  SpotlightState* st = std::any_cast<SpotlightState>(&m->optimizer);
  std::any fresh;
  if (st == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(kernels::SpotlightTrainer t,
                            kernels::SpotlightTrainer::Create(weights, lo, ao));
    fresh = SpotlightState{std::move(t), lo, ao};
    st = std::any_cast<SpotlightState>(&fresh);
  } else if (!SameOptions(*st, lo, ao)) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", m->name,
                     "' holds AdamW state from steps with other loss/optimizer params; "
                     "use the same params, or reload the model to start over"));
  }
  // Step a copy so that an error or a non-finite result changes nothing.
  kernels::SpotlightTrainer next = st->trainer;
  TANDEM_ASSIGN_OR_RETURN(double loss, next.Step(c.f32(0), c.f32(1)));
  const kernels::SpotlightHashWeights& w = next.weights();
  TANDEM_RETURN_IF_ERROR(CheckFinite({&w.w1, &w.b1, &w.w2, &w.b2}, "spotlight.train_step"));
  if (fresh.has_value()) {
    // Trainer copy of the weights + first and second moments.
    TANDEM_RETURN_IF_ERROR(c.model->SetOptimizerBytes(3 * ModelWeightBytes(m->weights)));
    m->optimizer = std::move(fresh);
    st = std::any_cast<SpotlightState>(&m->optimizer);
  }
  st->trainer = std::move(next);
  weights = st->trainer.weights();
  return HashOutputs(loss, weights);
}

Outputs MaskOutputs(double loss, const s::MaskGeneratorWeights& w) {
  return {EncodeFloat("loss", Scalar(loss)), EncodeFloat("w1", w.w1), EncodeFloat("b1", w.b1),
          EncodeFloat("w2", w.w2), EncodeFloat("b2", w.b2)};
}

absl::StatusOr<Outputs> MaskTrainStep(const KernelCall& c) {
  const Tensor& points = c.f32(0);
  // The soft pooling divides by sum_t m_t: an empty trajectory has no loss.
  if (points.dim(0) < 1 || points.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trajmamba.mask_train_step needs points (len >= 1, D >= 1), got ", points.ShapeString()));
  }
  s::MaskGeneratorWeights w = c.model
                                  ? std::get<s::MaskGeneratorWeights>(c.model->model().weights)
                                  : s::MaskGeneratorWeights{c.f32(2), c.f32(3), c.f32(4), c.f32(5)};
  TANDEM_RETURN_IF_ERROR(Budget(8.0 * Dim(points, 0) * Dim(points, 1) * Dim(w.w1, w.w1.rank() - 1),
                                kMaxWork, "mask step FLOPs"));
  const s::MaskLossOptions o{.keep_ratio = c.param("keep_ratio"), .lambda = c.param("lambda")};
  TANDEM_ASSIGN_OR_RETURN(double loss, s::MaskSgdStep(&w, points, c.f32(1), o, c.param("lr")));
  if (c.model == nullptr) return MaskOutputs(loss, w);
  TANDEM_RETURN_IF_ERROR(CheckFinite({&w.w1, &w.b1, &w.w2, &w.b2}, "trajmamba.mask_train_step"));
  auto& held = std::get<s::MaskGeneratorWeights>(c.model->mutable_model()->weights);
  held = std::move(w);
  return MaskOutputs(loss, held);
}

std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> v;
  const std::vector<InputSpec> hash_w = {
      {"w1", kF32, 2, true}, {"b1", kF32, 1, true}, {"w2", kF32, 2, true}, {"b2", kF32, 1, true}};
  std::vector<InputSpec> hash_in = {{"q", kF32, 2}, {"k", kF32, 2}};
  hash_in.insert(hash_in.end(), hash_w.begin(), hash_w.end());
  std::vector<InputSpec> hash_out = {{"loss", kF32, 0}};
  hash_out.insert(hash_out.end(), hash_w.begin(), hash_w.end());
  std::vector<ParamSpec> train_params = SpotlightLossParams();
  for (ParamSpec p : {Real("lr", 1e-3, 1e-9, 10), Real("beta1", 0.9, 0, 0.999999),
                      Real("beta2", 0.98, 0, 0.999999), Real("eps", 1e-8, 1e-12, 1),
                      Real("weight_decay", 0.1, 0, 10), Real("clip_norm", 1, 0, 1e6)}) {
    train_params.push_back(std::move(p));
  }
  v.push_back({"spotlight.train_step",
               "Spotlight hash training: Bradley-Terry ranking loss (before the step) and one "
               "AdamW step (clipped); with a \"spotlight.hash\" model, in place with the "
               "model's moments",
               false,
               hash_in,
               train_params,
               hash_out,
               SpotlightTrainStep,
               {"spotlight.hash"},
               false,
               true});

  std::vector<InputSpec> mask_in = {{"points", kF32, 2},   {"teacher", kF32, 1},
                                    {"w1", kF32, 2, true}, {"b1", kF32, 1, true},
                                    {"w2", kF32, 1, true}, {"b2", kF32, 1, true}};
  std::vector<InputSpec> mask_out = {{"loss", kF32, 0},
                                     {"w1", kF32, 2, true},
                                     {"b1", kF32, 1, true},
                                     {"w2", kF32, 1, true},
                                     {"b2", kF32, 1, true}};
  v.push_back(
      {"trajmamba.mask_train_step",
       "TrajMamba mask distillation: |e_m - e_teacher|^2 / D + lambda (mean m - rho)^2 "
       "(before the step) and one SGD step; with a \"trajmamba.mask\" model, in place",
       false,
       mask_in,
       {Real("keep_ratio", 0.5, 1e-6, 1), Real("lambda", 1, 0, 1e6), Real("lr", 0.1, 1e-9, 1e3)},
       mask_out,
       MaskTrainStep,
       {"trajmamba.mask"},
       false,
       true});
  return v;
}

}  // namespace

absl::Status RegisterModelKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
