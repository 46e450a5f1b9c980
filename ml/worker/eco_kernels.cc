#include "ml/worker/eco_kernels.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "ml/eco/genetic_transfer.h"
#include "ml/eco/learngene.h"
#include "ml/model/model.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/kernel_spec_helpers.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
using Masks = std::vector<std::vector<bool>>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;
constexpr proto::DType kU8 = proto::DTYPE_UINT8;

// The CNN all three kernels work on (parameters zero until set) and its
// gene chain conv1 -> conv2 -> fc1 (head out), as ml/eco's CnnGeneLayout.
struct Carrier {
  std::unique_ptr<Model> model;
  eco::GeneLayout layout;
};

std::vector<ParamSpec> ArchParams() {
  return {Int("channels", 1, 1, 64),  Int("height", 8, 4, 1024), Int("width", 8, 4, 1024),
          Int("classes", 5, 1, 4096), Int("conv1", 16, 1, 4096), Int("conv2", 32, 1, 4096),
          Int("hidden", 64, 1, 4096)};
}

std::vector<ParamSpec> With(std::vector<ParamSpec> base, std::vector<ParamSpec> more) {
  for (ParamSpec& p : more) base.push_back(std::move(p));
  return base;
}

// INVALID_ARGUMENT "request too large" before MakeCnn allocates more than
// kMaxScratch parameters, and, when `weights` is given, INVALID_ARGUMENT
// unless it is exactly the network's parameter count: both are checked
// before the network is built, so a small request never makes the worker
// allocate a large one. MakeCnn's shapes: 3x3 convolutions with padding 1
// keep H x W, each 2x2 max pool of stride 2 floors it to half.
absl::StatusOr<Carrier> MakeCarrier(const KernelCall& c,
                                    std::optional<int64_t> weights = std::nullopt) {
  const double ch = c.param("channels"), c1 = c.param("conv1"), c2 = c.param("conv2"),
               hid = c.param("hidden"), cls = c.param("classes");
  const double pooled =
      static_cast<double>((c.int_param("height") / 2 / 2) * (c.int_param("width") / 2 / 2));
  const double params =
      c1 * (ch * 9 + 1) + c2 * (c1 * 9 + 1) + hid * (c2 * pooled + 1) + cls * (hid + 1);
  TANDEM_RETURN_IF_ERROR(Budget(params, kMaxScratch, "ECO CNN parameters"));
  if (weights.has_value() && static_cast<double>(*weights) != params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weights have ", *weights, " values, the CNN has ", static_cast<int64_t>(params)));
  }
  Carrier out;
  TANDEM_ASSIGN_OR_RETURN(
      out.model, MakeCnn({c.int_param("channels"), c.int_param("height"), c.int_param("width")},
                         c.int_param("classes"),
                         {c.int_param("conv1"), c.int_param("conv2"), c.int_param("hidden")}));
  TANDEM_ASSIGN_OR_RETURN(out.layout, eco::CnnGeneLayout(*out.model));
  return out;
}

// Sets the carrier's flat weights from input `i`; INVALID_ARGUMENT on a
// count mismatch.
absl::Status SetWeights(const KernelCall& c, size_t i, Carrier* carrier) {
  const Tensor& w = c.f32(i);
  if (w.size() != carrier->model->num_params()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weights have ", w.size(), " values, the CNN has ", carrier->model->num_params()));
  }
  return carrier->model->SetParams(w.data());
}

int64_t TotalUnits(const eco::GeneLayout& lay) {
  int64_t n = 0;
  for (const eco::GeneLayer& g : lay.layers) n += g.units;
  return n;
}

absl::StatusOr<Masks> DecodeMasks(const WireTensor& w, const eco::GeneLayout& lay) {
  if (static_cast<int64_t>(w.raw.size()) != TotalUnits(lay)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masks have ", w.raw.size(), " entries, conv1 + conv2 + hidden = ", TotalUnits(lay)));
  }
  Masks masks;
  size_t k = 0;
  for (const eco::GeneLayer& g : lay.layers) {
    std::vector<bool> m(static_cast<size_t>(g.units));
    for (int64_t u = 0; u < g.units; ++u, ++k) {
      const char b = w.raw[k];
      if (b != 0 && b != 1) return absl::InvalidArgumentError("masks must hold 0/1 bytes");
      m[static_cast<size_t>(u)] = b == 1;
    }
    masks.push_back(std::move(m));
  }
  TANDEM_RETURN_IF_ERROR(eco::ValidateMasks(lay, masks));
  return masks;
}

proto::Tensor EncodeMasks(const Masks& masks) {
  std::string bytes;
  for (const std::vector<bool>& m : masks)
    for (bool b : m) bytes.push_back(b ? 1 : 0);
  const int64_t n = static_cast<int64_t>(bytes.size());
  return EncodeBytes("masks", {n}, std::move(bytes));
}

// Splits the flat gene into Learngene::weights by the sizes the masks imply
// (kept rows x (kept columns + 1)); INVALID_ARGUMENT when the total differs.
absl::StatusOr<eco::Learngene> DecodeGene(const Tensor& flat, Masks masks,
                                          const eco::GeneLayout& lay) {
  std::vector<int64_t> sizes;
  int64_t total = 0, kept_below = 0;
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    int64_t rows = 0;
    for (bool b : masks[l]) rows += b ? 1 : 0;
    const int64_t cols = l == 0 ? lay.layers[l].in_cols : kept_below * lay.layers[l].group;
    sizes.push_back(rows * (cols + 1));
    total += sizes.back();
    kept_below = rows;
  }
  if (flat.size() != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("gene has ", flat.size(), " values, the masks need ", total));
  }
  eco::Learngene g;
  const absl::Span<const float> d = flat.data();
  int64_t at = 0;
  for (int64_t s : sizes) {
    g.weights.emplace_back(d.begin() + at, d.begin() + at + s);
    at += s;
  }
  g.masks = std::move(masks);
  return g;
}

absl::StatusOr<proto::Tensor> EncodeGene(const eco::Learngene& g) {
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(g.num_params()));
  for (const std::vector<float>& w : g.weights) flat.insert(flat.end(), w.begin(), w.end());
  const int64_t n = static_cast<int64_t>(flat.size());
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromData({n}, std::move(flat)));
  return EncodeFloat("gene", t);
}

absl::StatusOr<Outputs> RunExtract(const KernelCall& c) {
  TANDEM_ASSIGN_OR_RETURN(Carrier carrier, MakeCarrier(c, static_cast<int64_t>(c.f32(0).size())));
  TANDEM_RETURN_IF_ERROR(SetWeights(c, 0, &carrier));
  TANDEM_ASSIGN_OR_RETURN(
      Masks masks, eco::SelectCircuit(*carrier.model, carrier.layout, c.param("keep_fraction")));
  TANDEM_ASSIGN_OR_RETURN(eco::Learngene g,
                          eco::ExtractLearngene(*carrier.model, carrier.layout, std::move(masks)));
  TANDEM_ASSIGN_OR_RETURN(proto::Tensor gene, EncodeGene(g));
  const float fraction = static_cast<float>(static_cast<double>(g.num_params()) /
                                            static_cast<double>(carrier.model->num_params()));
  TANDEM_ASSIGN_OR_RETURN(Tensor frac, Tensor::FromData({}, {fraction}));
  return MoveOutputs(EncodeMasks(g.masks), std::move(gene), EncodeFloat("fraction", frac));
}

absl::StatusOr<Outputs> RunInsert(const KernelCall& c) {
  TANDEM_ASSIGN_OR_RETURN(Carrier carrier, MakeCarrier(c, static_cast<int64_t>(c.f32(0).size())));
  TANDEM_RETURN_IF_ERROR(SetWeights(c, 0, &carrier));
  TANDEM_ASSIGN_OR_RETURN(Masks masks, DecodeMasks(c.inputs[1], carrier.layout));
  TANDEM_ASSIGN_OR_RETURN(eco::Learngene g, DecodeGene(c.f32(2), std::move(masks), carrier.layout));
  TANDEM_RETURN_IF_ERROR(eco::InsertLearngene(g, carrier.layout, carrier.model.get()));
  const int64_t n = carrier.model->num_params();
  TANDEM_ASSIGN_OR_RETURN(Tensor w, Tensor::FromData({n}, carrier.model->Flatten()));
  return MoveOutputs(EncodeFloat("weights", w));
}

absl::StatusOr<Outputs> RunGenerateStep(const KernelCall& c) {
  // MutateLearngene reads only the carrier's architecture (its parameters
  // are overwritten or zeroed around the circuit), so a zero CNN serves.
  TANDEM_ASSIGN_OR_RETURN(Carrier carrier, MakeCarrier(c));
  TANDEM_ASSIGN_OR_RETURN(Masks masks, DecodeMasks(c.inputs[0], carrier.layout));
  TANDEM_ASSIGN_OR_RETURN(eco::Learngene g, DecodeGene(c.f32(1), std::move(masks), carrier.layout));
  // Seeded std::mt19937_64: the same request gives the same offspring.
  std::mt19937_64 gen(static_cast<uint64_t>(c.int_param("seed")));
  TANDEM_ASSIGN_OR_RETURN(
      eco::Learngene child,
      eco::MutateLearngene(g, carrier.layout, *carrier.model, c.param("rate"), gen));
  TANDEM_ASSIGN_OR_RETURN(proto::Tensor gene, EncodeGene(child));
  return MoveOutputs(EncodeMasks(child.masks), std::move(gene));
}

// With a loaded "cnn" model (the federation's MakeCnn, e.g. from a
// checkpoint) "weights" is the model's flat parameter vector, filled in and
// (eco.insert) written back by the registry; the arch params must describe
// the same network (MakeCarrier checks the parameter count).
std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> s;
  s.push_back({"eco.extract",
               "ECO (NeurIPS 2025) / GTL: keep ceil(keep_fraction * units) units per gene layer "
               "of MakeCnn (conv1, conv2, fc1) by |incoming|_2 * |outgoing|_2, return the "
               "masks, the kept sub-tensors and their share of all parameters",
               false,
               {{"weights", kF32, 1, true}},
               With(ArchParams(), {Real("keep_fraction", 0.45, 1e-6, 1)}),
               {{"masks", kU8, 1}, {"gene", kF32, 1}, {"fraction", kF32, 0}},
               RunExtract, {"cnn"}});
  s.push_back({"eco.insert",
               "ECO: write a learngene (masks, gene) into a new CNN's flat weights; inputs from "
               "units outside the circuit into kept units are zeroed",
               false,
               {{"weights", kF32, 1, true}, {"masks", kU8, 1}, {"gene", kF32, 1}},
               ArchParams(),
               {{"weights", kF32, 1, true}},
               RunInsert, {"cnn"}, false, true});
  s.push_back({"eco.generate_step",
               "ECO Alg. 1: per gene layer swap round(rate * kept) kept units for random unkept "
               "ones (He-uniform re-initialised, seeded); one offspring of the generation loop",
               false,
               {{"masks", kU8, 1}, {"gene", kF32, 1}},
               With(ArchParams(), {Real("rate", 0.2, 0, 1), Int("seed", 0, 0, kMaxInt)}),
               {{"masks", kU8, 1}, {"gene", kF32, 1}},
               RunGenerateStep});
  return s;
}

}  // namespace

absl::Status RegisterEcoKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
