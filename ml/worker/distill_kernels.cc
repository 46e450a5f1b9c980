#include "ml/worker/distill_kernels.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/distill/gld.h"
#include "ml/kernels/distill/hdd.h"
#include "ml/kernels/distill/sdpgo.h"
#include "ml/kernels/distill/sled.h"
#include "ml/worker/kernel_spec_helpers.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
namespace ds = kernels::distill;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;

Tensor Scalar(double x) { return *Tensor::FromData({}, {static_cast<float>(x)}); }

absl::StatusOr<Tensor> RowsToTensor(const ds::Matrix64& m) {
  return Tensor::FromData({m.rows, m.cols}, std::vector<float>(m.data.begin(), m.data.end()));
}

ds::HddLossOptions HddFrom(const KernelCall& c) {
  return {.k = c.param("k"), .lambda = c.param("lambda")};
}

ds::GldOptions GldFrom(const KernelCall& c) {
  return {.top_k = c.int_param("top_k"), .temperature = c.param("temperature")};
}

std::vector<ParamSpec> HddParams() {
  return {Real("k", 1.0, 1e-6, 1e6), Real("lambda", 20.0, 0, 1e6)};
}

std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> s;
  s.push_back({"hdd.expmap0",
               "HDD (arXiv 2505.24623): features -> Lorentz hyperboloid <x,x>_L = -k (float64 inside)",
               false, {{"features", kF32, 2}}, {Real("k", 1.0, 1e-6, 1e6)}, {{"points", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 // LorentzModel::Exp0 REQUIRES at least one feature.
                 if (c.f32(0).dim(1) < 1) {
                   return absl::InvalidArgumentError("hdd.expmap0 needs D >= 1");
                 }
                 TANDEM_RETURN_IF_ERROR(Budget(Dim(c.f32(0), 0) * (Dim(c.f32(0), 1) + 1), kMaxScratch,
                                               "HDD float64 points"));
                 TANDEM_ASSIGN_OR_RETURN(const ds::LorentzModel m, ds::LorentzModel::Create(c.param("k")));
                 TANDEM_ASSIGN_OR_RETURN(const ds::Matrix64 f, ds::Matrix64::FromTensor(c.f32(0)));
                 TANDEM_ASSIGN_OR_RETURN(Tensor x, RowsToTensor(m.Exp0Rows(f)));
                 return MoveOutputs(EncodeFloat("points", x));
               }});

  s.push_back({"hdd.logmap0", "HDD: Lorentz points (n, D+1) -> tangent features at the origin (n, D)",
               false, {{"points", kF32, 2}}, {Real("k", 1.0, 1e-6, 1e6)}, {{"features", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& x = c.f32(0);
                 if (x.dim(1) < 2) return absl::InvalidArgumentError("hdd.logmap0 needs D + 1 >= 2");
                 TANDEM_ASSIGN_OR_RETURN(const ds::LorentzModel m, ds::LorentzModel::Create(c.param("k")));
                 TANDEM_ASSIGN_OR_RETURN(const ds::Matrix64 p, ds::Matrix64::FromTensor(x));
                 ds::Matrix64 f{p.rows, p.cols - 1, {}};
                 f.data.reserve(static_cast<size_t>(f.rows * f.cols));
                 for (int64_t r = 0; r < p.rows; ++r) {
                   TANDEM_ASSIGN_OR_RETURN(std::vector<double> row, m.Log0(p.row(r)));
                   f.data.insert(f.data.end(), row.begin(), row.end());
                 }
                 TANDEM_ASSIGN_OR_RETURN(Tensor out, RowsToTensor(f));
                 return MoveOutputs(EncodeFloat("features", out));
               }});

  s.push_back({"hdd.loss",
               "HDD: lambda * d_L(centroid(Exp0 real), centroid(Exp0 synthetic)) and its gradient",
               false, {{"real", kF32, 2}, {"synthetic", kF32, 2}}, HddParams(),
               {{"loss", kF32, 0}, {"distance", kF32, 0}, {"d_synthetic", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_RETURN_IF_ERROR(Budget((Dim(c.f32(0), 0) + Dim(c.f32(1), 0)) * (Dim(c.f32(0), 1) + 1),
                                               kMaxScratch, "HDD float64 points"));
                 TANDEM_ASSIGN_OR_RETURN(ds::HddLossResult r,
                                         ds::HddCentroidLoss(c.f32(0), c.f32(1), HddFrom(c)));
                 return MoveOutputs(EncodeFloat("loss", Scalar(r.loss)),
                                    EncodeFloat("distance", Scalar(r.distance)),
                                    EncodeFloat("d_synthetic", r.grad_synthetic));
               }});

  std::vector<ParamSpec> step = HddParams();
  for (ParamSpec p : {Real("lr", 1.0, 0, 1e6), Real("momentum", 0.5, 0, 1),
                      Int("embed_dim", 0, 0, 65536), Int("embed_seed", 0, 0, kMaxInt)}) {
    step.push_back(std::move(p));
  }
  s.push_back({"hdd.distill_step",
               "HDD: v = momentum v + grad, synthetic -= lr v over C classes; optional frozen "
               "random linear embedding (embed_dim, embed_seed); with a named \"tensors\" "
               "model holding synthetic and velocity, updates them in place",
               false,
               {{"real", kF32, 3}, {"synthetic", kF32, 3, true}, {"velocity", kF32, 3, true}},
               step, {{"loss", kF32, 0}, {"synthetic", kF32, 3, true}, {"velocity", kF32, 3, true}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const double rows = Dim(c.f32(0), 1) + Dim(c.f32(1), 1), din = Dim(c.f32(0), 2);
                 const double e = c.int_param("embed_dim") == 0 ? din : static_cast<double>(c.int_param("embed_dim"));
                 TANDEM_RETURN_IF_ERROR(Budget(din * e + 2 * rows * (e + 1), kMaxScratch, "HDD scratch"));
                 TANDEM_RETURN_IF_ERROR(Budget(c.int_param("embed_dim") == 0 ? 0.0 : 2 * Dim(c.f32(0), 0) *
                                                   (rows + Dim(c.f32(1), 1)) * din * e,
                                               kMaxWork, "HDD embedding FLOPs"));
                 ds::HddDistillOptions o;
                 o.loss = HddFrom(c);
                 o.lr = c.param("lr");
                 o.momentum = c.param("momentum");
                 o.embed_dim = c.int_param("embed_dim");
                 o.embed_seed = static_cast<uint64_t>(c.int_param("embed_seed"));
                 TANDEM_ASSIGN_OR_RETURN(ds::HddDistillResult r,
                                         ds::HddDistillStep(c.f32(0), c.f32(1), c.f32(2), o));
                 return MoveOutputs(EncodeFloat("loss", Scalar(r.loss)),
                                    EncodeFloat("synthetic", r.synthetic),
                                    EncodeFloat("velocity", r.velocity));
               }});

  const std::vector<ParamSpec> gld = {Int("top_k", 8, 1, 4096), Real("temperature", 1.0, 1e-3, 1e3)};
  s.push_back({"gld.graph",
               "InfiGFusion (arXiv 2505.13893): A = sum_t p~_t p~_t^T over the top-k softmax "
               "entries, on the active vocabulary ids",
               false, {{"logits", kF32, 2}}, gld,
               {{"nodes", proto::DTYPE_INT64, 1}, {"adjacency", kF32, 2}, {"strengths", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const double k = static_cast<double>(c.int_param("top_k"));
                 TANDEM_RETURN_IF_ERROR(Budget(Dim(c.f32(0), 0) * (Dim(c.f32(0), 1) * std::min(k, 64.0) + k * k),
                                               kMaxWork, "GLD graph work"));
                 TANDEM_ASSIGN_OR_RETURN(ds::CoActivationGraph g,
                                         ds::BuildCoActivationGraph(c.f32(0), GldFrom(c)));
                 const int64_t n = static_cast<int64_t>(g.nodes.size());
                 TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::FromData({n, n}, std::vector<float>(
                                                       g.adjacency.begin(), g.adjacency.end())));
                 TANDEM_ASSIGN_OR_RETURN(Tensor d, Tensor::FromData({n}, std::vector<float>(
                                                       g.strengths.begin(), g.strengths.end())));
                 return MoveOutputs(EncodeInt64("nodes", {n}, g.nodes), EncodeFloat("adjacency", a),
                                    EncodeFloat("strengths", d));
               }});

  s.push_back({"gld.loss",
               "GLD: (1/n) sum_r (dS_(r) - dT_(r))^2 over sorted node strengths (a lower bound "
               "of n^2 x Gromov-Wasserstein) and d/d student logits",
               false, {{"teacher", kF32, 2}, {"student", kF32, 2}}, gld,
               {{"loss", kF32, 0}, {"d_student", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const double k = static_cast<double>(c.int_param("top_k"));
                 TANDEM_RETURN_IF_ERROR(Budget(2 * Dim(c.f32(0), 0) * Dim(c.f32(0), 1) * (std::min(k, 64.0) + 4),
                                               kMaxWork, "GLD work"));
                 TANDEM_ASSIGN_OR_RETURN(ds::GldLossResult r, ds::GldLoss(c.f32(0), c.f32(1), GldFrom(c)));
                 return MoveOutputs(EncodeFloat("loss", Scalar(r.loss)),
                                    EncodeFloat("d_student", r.grad_student));
               }});

  s.push_back({"sdpgo.feature_weights",
               "SDPGO (OpenReview pbokMgz8e1): w = max(|G| - lambda, 0), normalised per sample",
               false, {{"feature_grad", kF32, 2}}, {Real("lambda", 0, 0, 1e6)}, {{"weights", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_ASSIGN_OR_RETURN(Tensor w, ds::GradientFeatureWeights(c.f32(0), c.param("lambda")));
                 return MoveOutputs(EncodeFloat("weights", w));
               }});

  s.push_back({"sdpgo.step",
               "SDPGO: CE + alpha tau^2 KL(q_hist || softmax(z/tau)) + beta sum w (f - f_prev)^2, "
               "gradients, and the KL-proximal refinement q_next of the history (with a "
               "\"tensors\" model holding q_hist, q_next replaces it in place)",
               false,
               {{"logits", kF32, 2}, {"labels", proto::DTYPE_INT64, 1}, {"features", kF32, 2},
                {"feature_grad", kF32, 2}, {"prev_features", kF32, 2}, {"q_hist", kF32, 2, true}},
               {Real("temperature", 3.0, 1e-2, 1e2), Real("alpha", 1.0, 0, 1e6), Real("beta", 1.0, 0, 1e6),
                Real("lambda", 0, 0, 1e6), Real("eta", 1.0, 0, 1e6)},
               {{"loss", kF32, 0}, {"terms", kF32, 1}, {"d_logits", kF32, 2}, {"d_features", kF32, 2},
                {"weights", kF32, 2}, {"q_next", kF32, 2, true, "q_hist"}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const std::vector<int64_t> labels = RawValues<int64_t>(c.inputs[1]);
                 ds::SdpgoOptions o{.temperature = c.param("temperature"), .alpha = c.param("alpha"),
                                    .beta = c.param("beta"), .lambda = c.param("lambda"),
                                    .eta = c.param("eta")};
                 TANDEM_ASSIGN_OR_RETURN(ds::SdpgoResult r,
                                         ds::SdpgoLoss(c.f32(0), labels, c.f32(2), c.f32(3), c.f32(4),
                                                       c.f32(5), o));
                 TANDEM_ASSIGN_OR_RETURN(Tensor terms, Tensor::FromData({3}, {static_cast<float>(r.ce),
                                                                             static_cast<float>(r.kl),
                                                                             static_cast<float>(r.feature)}));
                 return MoveOutputs(
                     EncodeFloat("loss", Scalar(r.loss)), EncodeFloat("terms", terms),
                     EncodeFloat("d_logits", r.grad_logits),
                     EncodeFloat("d_features", r.grad_features), EncodeFloat("weights", r.weights),
                     EncodeFloat("q_next", r.q_next));
               }});

  s.push_back({"sled.energy_loss",
               "SLED (arXiv 2505.13181): (2/m) sum |s_i - y|^beta - 1/(m(m-1)) sum_{i!=j} "
               "|s_i - s_j|^beta, masked mean over steps, and d/d samples",
               false, {{"samples", kF32, 3}, {"target", kF32, 2}, {"mask", kF32, 1}},
               {Real("beta", 1.0, 1e-6, 2.0)}, {{"loss", kF32, 0}, {"d_samples", kF32, 3}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& sm = c.f32(0);
                 TANDEM_RETURN_IF_ERROR(Budget(3 * Dim(sm, 0) * Dim(sm, 1) * Dim(sm, 1) * Dim(sm, 2),
                                               kMaxWork, "SLED pair work"));
                 TANDEM_ASSIGN_OR_RETURN(ds::EnergyLossResult r,
                                         ds::EnergyDistanceLoss(sm, c.f32(1), c.f32(2), {.beta = c.param("beta")}));
                 return MoveOutputs(EncodeFloat("loss", Scalar(r.loss)),
                                    EncodeFloat("d_samples", r.grad_samples));
               }});
  for (KernelSpec& k : s) {
    if (k.name == "hdd.distill_step") {
      // The registry fills synthetic / velocity from the model and writes
      // the step's result back (kernel_registry.h).
      k.model_kinds = {"tensors"};
      k.trains_model = true;
    }
    if (k.name == "sdpgo.step") {
      // The history q lives in a "tensors" model (tensor "q_hist"); each
      // step replaces it with its KL-proximal refinement q_next.
      k.model_kinds = {"tensors"};
      k.trains_model = true;
    }
  }
  return s;
}

}  // namespace

absl::Status RegisterDistillKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
