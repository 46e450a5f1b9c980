#include "ml/worker/training_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/training/cross_spectra.h"
#include "ml/kernels/training/plrf.h"
#include "ml/kernels/training/reweighted_pruning.h"
#include "ml/worker/kernel_spec_helpers.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
namespace tr = kernels::training;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;
constexpr proto::DType kU8 = proto::DTYPE_UINT8;



Tensor Scalar(double x) { return *Tensor::FromData({}, {static_cast<float>(x)}); }

tr::LayerTransform TransformFrom(const KernelCall& c) {
  return c.int_param("transform") == 0 ? tr::LayerTransform::kDft : tr::LayerTransform::kDct;
}

tr::ReweightOptions ReweightFrom(const KernelCall& c) {
  tr::ReweightOptions o;
  const int64_t clip = c.int_param("clip");
  o.clip = clip == 0 ? tr::WeightClip::kNone
                     : (clip == 1 ? tr::WeightClip::kTruncate : tr::WeightClip::kClamp);
  o.clip_value = c.param("clip_value");
  return o;
}

// Checks the CrossSpectra caps, then builds the transform with locations
// drawn from location_seed (the client re-derives them from the same seed
// or reads them from crossspectra.forward's output).
absl::StatusOr<std::unique_ptr<tr::CrossSpectra>> MakeCrossSpectra(const KernelCall& c,
                                                                  int64_t layers, int64_t p,
                                                                  int64_t d_out, int64_t d_in,
                                                                  int64_t k1, int64_t k2) {
  const double rc = static_cast<double>(p) * d_out * d_in;
  TANDEM_RETURN_IF_ERROR(Budget(rc * layers, kMaxScratch, "Delta W entries"));
  TANDEM_RETURN_IF_ERROR(Budget(2 * rc * k2, kMaxScratch, "spectral slices (floats)"));
  const tr::LayerTransform t = TransformFrom(c);
  const tr::CrossSpectraShape shape{.layers = layers, .projections = p, .d_out = d_out,
                                    .d_in = d_in, .kappa1 = k1, .kappa2 = k2, .transform = t,
                                    .scale = c.param("scale")};
  TANDEM_ASSIGN_OR_RETURN(
      tr::SpectralLocations loc,
      tr::SampleSpectralLocations(p * d_out, d_in, k1,
                                  static_cast<uint64_t>(c.int_param("location_seed"))));
  TANDEM_ASSIGN_OR_RETURN(auto cs, tr::CrossSpectra::Create(shape, std::move(loc)));
  TANDEM_RETURN_IF_ERROR(Budget(cs->Flops(), kMaxWork, "CrossSpectra FLOPs"));
  return cs;
}

std::vector<ParamSpec> SpectralParams() {
  return {Int("transform", 1, 0, 1), Real("scale", 1, -1e6, 1e6),
          Int("location_seed", 0, 0, kMaxInt)};
}

absl::Status CheckMaskBytes(const WireTensor& w) {
  for (char b : w.raw) {
    if (b != 0 && b != 1) return absl::InvalidArgumentError("masks must hold 0/1 bytes");
  }
  return absl::OkStatus();
}

std::string Bytes(const std::vector<uint8_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> s;
  s.push_back({"dana.plrf_curve",
               "DANA (arXiv 2505.16098) on power-law random features from theta = 0: closed-form "
               "risk at log-spaced steps; optimizer 0 = DANA-decaying, 1 = DANA-constant, "
               "2 = SGD-momentum, 3 = SGD",
               false, {},
               {Real("alpha", 1, 0.05, 10), Real("beta", 0.3, -10, 10), Int("v", 2000, 1, 1 << 20),
                Int("d", 500, 1, 1 << 20), Int("batch", 1, 1, 4096), Int("steps", 1000, 1, 1e8),
                Int("optimizer", 0, 0, 3), Real("momentum", 0.9, 0, 0.999),
                Int("log_points", 50, 1, 1000), Int("seed", 1, 0, kMaxInt),
                Int("sample_seed", 2, 0, kMaxInt)},
               {{"steps", proto::DTYPE_INT64, 1}, {"risk", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const double v = c.param("v"), d = c.param("d");
                 TANDEM_RETURN_IF_ERROR(Budget(v * d, kMaxScratch, "PLRF W entries"));
                 TANDEM_RETURN_IF_ERROR(
                     Budget(2 * v * d * (c.param("steps") * c.param("batch") + c.param("log_points")),
                            kMaxWork, "PLRF FLOPs"));
                 TANDEM_ASSIGN_OR_RETURN(
                     auto problem, tr::PlrfProblem::Create(
                                       {.alpha = c.param("alpha"), .beta = c.param("beta"),
                                        .v = c.int_param("v"), .d = c.int_param("d"),
                                        .seed = static_cast<uint64_t>(c.int_param("seed"))}));
                 const tr::PlrfOptimizer kinds[] = {
                     tr::PlrfOptimizer::kDanaDecaying, tr::PlrfOptimizer::kDanaConstant,
                     tr::PlrfOptimizer::kSgdMomentum, tr::PlrfOptimizer::kSgd};
                 const tr::PlrfRunOptions run{
                     .steps = c.int_param("steps"), .batch = c.int_param("batch"),
                     .momentum = c.param("momentum"),
                     .sample_seed = static_cast<uint64_t>(c.int_param("sample_seed")),
                     .log_points = c.int_param("log_points")};
                 TANDEM_ASSIGN_OR_RETURN(tr::PlrfCurve curve,
                                         tr::RunPlrf(*problem, kinds[c.int_param("optimizer")], run));
                 const int64_t n = static_cast<int64_t>(curve.steps.size());
                 std::vector<float> risk(curve.risk.begin(), curve.risk.end());
                 TANDEM_ASSIGN_OR_RETURN(Tensor r, Tensor::FromData({n}, std::move(risk)));
                 return MoveOutputs(EncodeInt64("steps", {n}, curve.steps), EncodeFloat("risk", r));
               }});

  std::vector<ParamSpec> fwd = {Int("layers", 12, 1, kMaxInt), Int("projections", 3, 1, 16),
                                Int("d_out", 64, 1, kMaxInt), Int("d_in", 64, 1, kMaxInt)};
  for (ParamSpec& p : SpectralParams()) fwd.push_back(std::move(p));
  s.push_back({"crossspectra.forward",
               "CrossSpectra (NeurIPS 2025) [I]: Delta W = scale Re(layer basis x sparse 2-D "
               "IDFT) of coefficients (kappa2, kappa1); transform 0 = DFT, 1 = DCT-II along "
               "layers; locations drawn from location_seed",
               false, {{"coefficients", kF32, 2, true}}, fwd,
               {{"delta", kF32, 4}, {"locations", proto::DTYPE_INT64, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& coeffs = c.f32(0);
                 TANDEM_ASSIGN_OR_RETURN(
                     auto cs, MakeCrossSpectra(c, c.int_param("layers"), c.int_param("projections"),
                                               c.int_param("d_out"), c.int_param("d_in"),
                                               coeffs.dim(1), coeffs.dim(0)));
                 TANDEM_ASSIGN_OR_RETURN(Tensor dw, cs->Forward(coeffs));
                 std::vector<int64_t> loc;
                 for (const auto& [u, v] : cs->locations()) {
                   loc.push_back(u);
                   loc.push_back(v);
                 }
                 const int64_t k1 = coeffs.dim(1);
                 return MoveOutputs(EncodeFloat("delta", dw),
                                    EncodeInt64("locations", {k1, 2}, loc));
               }});

  std::vector<ParamSpec> adj = {Int("kappa1", 1000, 1, kMaxInt), Int("kappa2", 1, 1, kMaxInt)};
  for (ParamSpec& p : SpectralParams()) adj.push_back(std::move(p));
  s.push_back({"crossspectra.adjoint",
               "CrossSpectra gradient: dL/dDelta W (L, P, d_out, d_in) -> dL/dc (kappa2, kappa1), "
               "the adjoint of crossspectra.forward with the same parameters",
               false, {{"grad_delta", kF32, 4}}, adj, {{"grad_coefficients", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& g = c.f32(0);
                 TANDEM_ASSIGN_OR_RETURN(
                     auto cs, MakeCrossSpectra(c, g.dim(0), g.dim(1), g.dim(2), g.dim(3),
                                               c.int_param("kappa1"), c.int_param("kappa2")));
                 TANDEM_ASSIGN_OR_RETURN(Tensor gc, cs->Adjoint(g));
                 return MoveOutputs(EncodeFloat("grad_coefficients", gc));
               }});

  s.push_back({"prune.reweighted_gradient",
               "gradient reweighting (NeurIPS 2025) [I]: score gradient of E L(w . m) from "
               "sub-models drawn from old_scores, weights clipped (clip 0 = none, 1 = min(rho, c), "
               "2 = clamp to [1 - eps, 1 + eps]), leave-one-out baseline",
               false,
               {{"masks", kU8, 2}, {"losses", kF32, 1}, {"scores", kF32, 1},
                {"old_scores", kF32, 1}},
               {Int("clip", 1, 0, 2), Real("clip_value", 2, 1e-6, 1e6), Int("leave_one_out", 1, 0, 1),
                Real("baseline", 0, -1e30, 1e30)},
               {{"grad", kF32, 1}, {"weights", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const WireTensor& m = c.inputs[0];
                 const int64_t k = m.shape[0], n = m.shape[1];
                 if (c.f32(1).size() != k || c.f32(2).size() != n || c.f32(3).size() != n) {
                   return absl::InvalidArgumentError(absl::StrCat(
                       "masks (", k, ", ", n, ") need losses (", k, ") and scores (", n, ")"));
                 }
                 TANDEM_RETURN_IF_ERROR(CheckMaskBytes(m));
                 tr::SubModelSamples smp;
                 smp.n = n;
                 smp.scores.assign(c.f32(3).data().begin(), c.f32(3).data().end());
                 smp.masks = RawValues<uint8_t>(m);
                 smp.losses.assign(c.f32(1).data().begin(), c.f32(1).data().end());
                 tr::ReweightOptions o = ReweightFrom(c);
                 o.leave_one_out = c.int_param("leave_one_out") != 0;
                 o.baseline = c.param("baseline");
                 TANDEM_ASSIGN_OR_RETURN(tr::ReweightedGradient g,
                                         tr::ReweightedScoreGradient(smp, c.f32(2).data(), o));
                 std::vector<float> w(g.weights.begin(), g.weights.end());
                 TANDEM_ASSIGN_OR_RETURN(Tensor gt, Tensor::FromData({n}, std::move(g.grad)));
                 TANDEM_ASSIGN_OR_RETURN(Tensor wt, Tensor::FromData({k}, std::move(w)));
                 return MoveOutputs(EncodeFloat("grad", gt), EncodeFloat("weights", wt));
               }});

  s.push_back({"prune.project",
               "Euclidean projection onto {lo <= s <= 1 - lo, sum s <= keep} and the top-keep mask",
               false, {{"x", kF32, 1}}, {Int("keep", 1, 0, kMaxInt), Real("min_score", 1e-3, 0, 0.5)},
               {{"scores", kF32, 1}, {"mask", kU8, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& x = c.f32(0);
                 const int64_t keep = c.int_param("keep");
                 TANDEM_ASSIGN_OR_RETURN(std::vector<float> y,
                                         tr::ProjectScores(x.data(), static_cast<double>(keep),
                                                           c.param("min_score"),
                                                           1.0 - c.param("min_score")));
                 TANDEM_ASSIGN_OR_RETURN(std::vector<uint8_t> mask, tr::TopKMask(y, keep));
                 TANDEM_ASSIGN_OR_RETURN(Tensor yt, Tensor::FromData({x.size()}, std::move(y)));
                 return MoveOutputs(EncodeFloat("scores", yt),
                                    EncodeBytes("mask", {x.size()}, Bytes(mask)));
               }});

  s.push_back({"prune.layer_mask",
               "prune one linear layer W (d_in, d_out) to a sparsity on calibration inputs X "
               "(N, d_in): minimise E ||X W - X (W . m)||^2 / 2N over Bernoulli scores with "
               "reweighted outdated sub-models, RMS preconditioning, projection; top-k mask",
               false, {{"x", kF32, 2}, {"w", kF32, 2}},
               {Real("sparsity", 0.5, 0, 1), Int("steps", 200, 1, 1e6), Real("learning_rate", 0.03, 1e-9, 10),
                Int("samples", 8, 1, 4096), Int("reinstantiate_every", 4, 1, 1e6),
                Int("clip", 1, 0, 2), Real("clip_value", 2, 1e-6, 1e6), Int("seed", 1, 0, kMaxInt)},
               {{"mask", kU8, 2}, {"scores", kF32, 2}, {"loss", kF32, 0}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& w = c.f32(1);
                 const double n = static_cast<double>(w.size());
                 const double passes = std::ceil(c.param("steps") / c.param("reinstantiate_every")) *
                                       c.param("samples");
                 TANDEM_ASSIGN_OR_RETURN(auto layer, tr::LayerReconstruction::Create(c.f32(0), w));
                 TANDEM_RETURN_IF_ERROR(Budget(passes * layer->LossFlops() +
                                                   c.param("steps") * c.param("samples") * n * 8,
                                               kMaxWork, "pruning FLOPs"));
                 TANDEM_RETURN_IF_ERROR(Budget(c.param("samples") * n / 4, kMaxScratch, "mask bytes"));
                 tr::PrunerOptions o;
                 o.n = w.size();
                 o.keep = static_cast<int64_t>(std::llround((1.0 - c.param("sparsity")) * n));
                 o.learning_rate = c.param("learning_rate");
                 o.samples = c.int_param("samples");
                 o.reinstantiate_every = c.int_param("reinstantiate_every");
                 o.reweight = ReweightFrom(c);
                 o.min_score = std::min(1e-3, 0.5 / n);
                 o.seed = static_cast<uint64_t>(c.int_param("seed"));
                 TANDEM_ASSIGN_OR_RETURN(auto pruner, tr::ProbMaskPruner::Create(o));
                 for (int64_t t = 0; t < c.int_param("steps"); ++t) {
                   TANDEM_RETURN_IF_ERROR(pruner->Step(layer->AsLossFn()));
                 }
                 const std::vector<uint8_t> mask = pruner->Mask();
                 TANDEM_ASSIGN_OR_RETURN(double loss, layer->Loss(mask));
                 TANDEM_ASSIGN_OR_RETURN(Tensor sc, Tensor::FromData(w.shape(), pruner->scores()));
                 return MoveOutputs(EncodeBytes("mask", w.shape(), Bytes(mask)),
                                    EncodeFloat("scores", sc), EncodeFloat("loss", Scalar(loss)));
               }});
  for (KernelSpec& k : s) {
    // The adapter's coefficients may live in a "tensors" model (tensor
    // "coefficients"), filled in by the registry (kernel_registry.h).
    if (k.name == "crossspectra.forward") k.model_kinds = {"tensors"};
  }
  return s;
}

}  // namespace

absl::Status RegisterTrainingKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
