#include "ml/worker/search_kernels.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/search/frappe.h"
#include "ml/kernels/search/frappe_sim.h"
#include "ml/kernels/search/part_packer.h"
#include "ml/kernels/search/ssm_scan.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/search/trajmamba.h"
#include "ml/worker/kernel_spec_helpers.h"

namespace tandem::ml::worker {
namespace {

namespace s = kernels::search;
using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;
constexpr proto::DType kI32 = proto::DTYPE_INT32;
constexpr proto::DType kI64 = proto::DTYPE_INT64;
// Per-request caps beside kernel_spec_helpers.h's FLOP and scratch caps:
// bandit pulls, voxel-neighbourhood visits.
constexpr double kMaxPulls = 2e8;
constexpr double kMaxVoxelVisits = 4e9;



std::vector<double> Doubles(const Tensor& t) { return {t.data().begin(), t.data().end()}; }

Tensor Scalar(double v) { return *Tensor::FromData({}, {static_cast<float>(v)}); }

absl::StatusOr<s::PreferenceCone> ConeFrom(const Tensor& cone, int64_t l) {
  if (cone.dim(1) != l) {
    return absl::InvalidArgumentError(absl::StrCat("cone matrix has ", cone.dim(1),
                                                   " columns, means have ", l, " objectives"));
  }
  return s::PreferenceCone::Create(l, Doubles(cone));
}

s::TrajMambaConfig ConfigFrom(const KernelCall& c) {
  s::TrajMambaConfig cfg;
  cfg.d_model = c.int_param("d_model");
  cfg.d_state = c.int_param("d_state");
  cfg.head_dim = c.int_param("head_dim");
  cfg.layers = c.int_param("layers");
  cfg.road_vocab = c.int_param("road_vocab");
  cfg.chunk = c.int_param("chunk");
  return cfg;
}

std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> v;
  v.push_back({"trajmamba.scan",
               "TrajMamba/Mamba-2 selective scan h_t = exp(softplus(dt+b) A) h + delta x B^T, "
               "y = h C + D x; chunk 0 = naive recurrence",
               true,
               {{"x", kF32, 4}, {"dt", kF32, 3}, {"a", kF32, 1}, {"b", kF32, 3}, {"c", kF32, 3},
                {"d", kF32, 1}, {"dt_bias", kF32, 1}},
               {Int("chunk", 64, 0, s::kMaxScanChunk)},
               {{"y", kF32, 4}, {"state", kF32, 4}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& x = c.f32(0);
                 const s::ScanDims dims{x.dim(0), x.dim(1), x.dim(2), x.dim(3), c.f32(3).dim(2)};
                 const double chunk = static_cast<double>(c.int_param("chunk"));
                 TANDEM_RETURN_IF_ERROR(Budget(
                     s::SelectiveScanFlops(dims) * (1 + chunk / static_cast<double>(dims.state_dim)),
                     kMaxWork, "scan FLOPs"));
                 TANDEM_RETURN_IF_ERROR(Budget(static_cast<double>(dims.batch) * dims.heads *
                                                   dims.head_dim * dims.state_dim *
                                                   (1 + dims.length / std::max(chunk, 1.0)),
                                               double{1 << 26}, "scan chunk states"));
                 TANDEM_ASSIGN_OR_RETURN(
                     s::ScanOutput o,
                     s::SelectiveScan(x, c.f32(1), c.f32(2), c.f32(3), c.f32(4), c.f32(5),
                                      c.f32(6), {.chunk = c.int_param("chunk"), .backend = c.backend}));
                 return MoveOutputs(EncodeFloat("y", o.y), EncodeFloat("state", o.state));
               }});

  const std::vector<ParamSpec> model = {
      Int("d_model", 32, 1, 1024),      Int("d_state", 16, 1, 256), Int("head_dim", 16, 1, 256),
      Int("layers", 2, 1, 8),           Int("road_vocab", 1024, 1, 1 << 20),
      Int("chunk", 64, 0, 4096),        Int("weight_seed", 42, 0, kMaxInt)};
  v.push_back({"trajmamba.encode",
               "TrajMamba (arXiv 2510.17545): GPS + road Mamba-2 branches, mean-pooled "
               "trajectory embeddings; weights (and sizes, chunk) of the named "
               "\"trajmamba.encoder\" model, else drawn from weight_seed",
               false, {{"gps", kF32, 3}, {"times", kF32, 2}, {"roads", kF32, 2}, {"lengths", kI64, 1}},
               model, {{"embeddings", kF32, 2}, {"points", kF32, 3}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const s::TrajMambaWeights* loaded =
                     c.model ? &std::get<s::TrajMambaWeights>(c.model->model().weights) : nullptr;
                 const s::TrajMambaConfig cfg = loaded ? loaded->config : ConfigFrom(c);
                 const double points = static_cast<double>(c.f32(0).dim(0)) * c.f32(0).dim(1);
                 if (loaded == nullptr) {
                   TANDEM_RETURN_IF_ERROR(Budget(static_cast<double>(cfg.road_vocab) * cfg.d_model,
                                                 double{1 << 26}, "road embedding table"));
                 }
                 TANDEM_RETURN_IF_ERROR(Budget(points * cfg.d_model * 4, double{1 << 26},
                                               "point states"));
                 TANDEM_RETURN_IF_ERROR(Budget(s::TrajMambaFlops(cfg, 1) * points, kMaxWork,
                                               "encoder FLOPs"));
                 s::TrajMambaWeights seeded;
                 if (loaded == nullptr) {
                   TANDEM_ASSIGN_OR_RETURN(
                       seeded, s::TrajMambaWeights::Random(
                                   cfg, static_cast<uint64_t>(c.int_param("weight_seed"))));
                 }
                 s::TrajBatch batch{c.f32(0), c.f32(1), c.f32(2), RawValues<int64_t>(c.inputs[3])};
                 TANDEM_ASSIGN_OR_RETURN(s::TrajEncoding e,
                                         s::TrajMambaEncode(loaded ? *loaded : seeded, batch));
                 return MoveOutputs(EncodeFloat("embeddings", e.embeddings),
                                    EncodeFloat("points", e.points));
               }});

  v.push_back({"trajmamba.mask",
               "TrajMamba mask generator: keep scores m_t = sigmoid(MLP(point_t)) and the hard "
               "key points (endpoints + top scores); weights of the named \"trajmamba.mask\" "
               "model, else drawn from weight_seed",
               false, {{"points", kF32, 2}},
               {Int("hidden", 32, 1, 1024), Int("weight_seed", 7, 0, kMaxInt),
                Real("keep_ratio", 0.5, 1e-6, 1)},
               {{"scores", kF32, 1}, {"keep", kI64, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& p = c.f32(0);
                 const s::MaskGeneratorWeights* loaded =
                     c.model ? &std::get<s::MaskGeneratorWeights>(c.model->model().weights)
                             : nullptr;
                 const double hidden =
                     static_cast<double>(loaded ? loaded->w1.dim(1) : c.int_param("hidden"));
                 TANDEM_RETURN_IF_ERROR(
                     Budget(2.0 * p.dim(0) * p.dim(1) * hidden, kMaxWork, "mask FLOPs"));
                 s::MaskGeneratorWeights seeded;
                 if (loaded == nullptr) {
                   TANDEM_ASSIGN_OR_RETURN(seeded,
                                           s::MaskGeneratorWeights::Random(
                                               p.dim(1), c.int_param("hidden"),
                                               static_cast<uint64_t>(c.int_param("weight_seed"))));
                 }
                 TANDEM_ASSIGN_OR_RETURN(Tensor scores, s::MaskScores(loaded ? *loaded : seeded, p));
                 TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> keep,
                                         s::SelectKeyPoints(scores, c.param("keep_ratio")));
                 const int64_t n = static_cast<int64_t>(keep.size());
                 return MoveOutputs(EncodeFloat("scores", scores), EncodeInt64("keep", {n}, keep));
               }});

  v.push_back({"frappe.allocation",
               "FraPPE (arXiv 2508.16487): Frank-Wolfe allocation w* for means (K, L) and cone "
               "A x >= 0 (m, L); value = T*^-1",
               false, {{"means", kF32, 2}, {"cone", kF32, 2}},
               {Real("sigma", 1, 1e-6, 1e6), Int("iterations", 10000, 1, 10000000)},
               {{"w", kF32, 1}, {"value", kF32, 0}, {"pareto", kI64, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& m = c.f32(0);
                 const double k = static_cast<double>(m.dim(0));
                 TANDEM_RETURN_IF_ERROR(Budget(k * k * 1e5 * c.f32(1).dim(0) * m.dim(1), 1e12,
                                               "cone projections"));
                 TANDEM_RETURN_IF_ERROR(Budget(k * k * c.int_param("iterations"), 1e11,
                                               "Frank-Wolfe work"));
                 TANDEM_ASSIGN_OR_RETURN(s::PreferenceCone cone, ConeFrom(c.f32(1), m.dim(1)));
                 TANDEM_ASSIGN_OR_RETURN(s::FrappeObjective f,
                                         s::FrappeObjective::Create(Doubles(m), m.dim(0), cone,
                                                                    c.param("sigma")));
                 TANDEM_ASSIGN_OR_RETURN(s::FrankWolfeResult r,
                                         s::FrankWolfe(f, c.int_param("iterations")));
                 TANDEM_ASSIGN_OR_RETURN(Tensor w, Tensor::FromData({m.dim(0)}, std::vector<float>(
                                                                     r.w.begin(), r.w.end())));
                 const int64_t np = static_cast<int64_t>(f.pareto().size());
                 return MoveOutputs(EncodeFloat("w", w), EncodeFloat("value", Scalar(r.value)),
                                    EncodeInt64("pareto", {np}, f.pareto()));
               }});

  v.push_back({"frappe.simulate",
               "FraPPE vs uniform sampling on a Gaussian bandit: stats = [frappe mean samples, "
               "uniform mean samples, frappe error rate, uniform error rate, T* log(1/delta)]",
               false, {{"means", kF32, 2}, {"cone", kF32, 2}},
               {Real("delta", 0.05, 1e-9, 0.5), Real("sigma", 1, 1e-6, 1e6), Int("runs", 10, 1, 1000),
                Int("max_samples", 100000, 2, 10000000), Int("fw_iterations", 100, 1, 10000),
                Int("seed", 1, 0, kMaxInt)},
               {{"stats", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& m = c.f32(0);
                 const double k = static_cast<double>(m.dim(0));
                 TANDEM_RETURN_IF_ERROR(Budget(2.0 * c.int_param("runs") * c.int_param("max_samples"),
                                               kMaxPulls, "bandit pulls"));
                 TANDEM_RETURN_IF_ERROR(Budget(2.0 * c.int_param("runs") * c.int_param("max_samples") *
                                                   k * k * (c.int_param("fw_iterations") + m.dim(1)),
                                               1e13, "simulation work"));
                 TANDEM_ASSIGN_OR_RETURN(s::PreferenceCone cone, ConeFrom(c.f32(1), m.dim(1)));
                 s::BanditOptions o;
                 o.delta = c.param("delta");
                 o.sigma = c.param("sigma");
                 o.max_samples = c.int_param("max_samples");
                 o.fw_iterations = c.int_param("fw_iterations");
                 o.seed = static_cast<uint64_t>(c.int_param("seed"));
                 TANDEM_ASSIGN_OR_RETURN(s::SamplerComparison r,
                                         s::CompareSamplers(Doubles(m), m.dim(0), cone, o,
                                                            c.int_param("runs")));
                 TANDEM_ASSIGN_OR_RETURN(
                     Tensor stats,
                     Tensor::FromData({5}, {static_cast<float>(r.frappe_mean_samples),
                                            static_cast<float>(r.uniform_mean_samples),
                                            static_cast<float>(r.frappe_error_rate),
                                            static_cast<float>(r.uniform_error_rate),
                                            static_cast<float>(r.lower_bound)}));
                 return MoveOutputs(EncodeFloat("stats", stats));
               }});

  v.push_back({"partpacker.pack",
               "PartPacker (arXiv 2506.09980) dual volume packing of a voxel label grid "
               "(-1 empty); stats = [contact edges, contractions, conflicts, reassembly ok]",
               false, {{"labels", kI32, 3}}, {Int("radius", 1, 1, 4)},
               {{"part_volume", kI32, 1}, {"group", kI64, 1}, {"volume0", kI32, 3},
                {"volume1", kI32, 3}, {"stats", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const WireTensor& in = c.inputs[0];
                 s::VoxelParts v{in.shape[0], in.shape[1], in.shape[2], 0, RawValues<int32_t>(in)};
                 const double r = static_cast<double>(2 * c.int_param("radius") + 1);
                 TANDEM_RETURN_IF_ERROR(Budget(static_cast<double>(v.labels.size()) * r * r * r,
                                               kMaxVoxelVisits, "voxel neighbourhood visits"));
                 int32_t top = -1;
                 for (int32_t l : v.labels) top = std::max(top, l);
                 v.parts = std::max<int64_t>(1, int64_t{top} + 1);
                 TANDEM_ASSIGN_OR_RETURN(s::Packing p, s::PackDualVolumes(v, c.int_param("radius")));
                 TANDEM_ASSIGN_OR_RETURN(s::ReassemblyReport rep,
                                         s::CheckReassembly(v, p, c.int_param("radius")));
                 std::vector<int32_t> pv(p.part_volume.begin(), p.part_volume.end());
                 TANDEM_ASSIGN_OR_RETURN(
                     Tensor stats, Tensor::FromData({4}, {static_cast<float>(p.contact_edges),
                                                          static_cast<float>(p.contractions),
                                                          static_cast<float>(p.conflicts),
                                                          rep.ok() ? 1.0f : 0.0f}));
                 return MoveOutputs(EncodeInt32("part_volume", {v.parts}, pv),
                                    EncodeInt64("group", {v.parts}, p.group),
                                    EncodeInt32("volume0", in.shape, p.volume[0].labels),
                                    EncodeInt32("volume1", in.shape, p.volume[1].labels),
                                    EncodeFloat("stats", stats));
               }});
  for (KernelSpec& k : v) {
    if (k.name == "trajmamba.encode") k.model_kinds = {"trajmamba.encoder"};
    if (k.name == "trajmamba.mask") k.model_kinds = {"trajmamba.mask"};
  }
  return v;
}

}  // namespace

absl::Status RegisterSearchKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
