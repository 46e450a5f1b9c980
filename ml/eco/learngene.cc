#include "ml/eco/learngene.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::eco {
namespace {

const ParamInfo* FindParam(const Model& m, const std::string& name) {
  for (const ParamInfo& p : m.param_infos()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<GeneLayer> LayerOf(const Model& m, const std::string& prefix) {
  const ParamInfo* w = FindParam(m, prefix + ".weight");
  const ParamInfo* b = FindParam(m, prefix + ".bias");
  if (w == nullptr || b == nullptr || w->shape.size() != 2 || b->shape.size() != 1 ||
      b->shape[0] != w->shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has no 2-D weight + bias for gene layer '", prefix, "'"));
  }
  GeneLayer g;
  g.weight = w->name;
  g.bias = b->name;
  g.units = w->shape[0];
  g.in_cols = w->shape[1];
  g.weight_offset = w->offset;
  g.bias_offset = b->offset;
  return g;
}

// Kept columns of layer l: all for the first layer, else the groups of the
// kept units below.
std::vector<int64_t> KeptCols(const GeneLayout& lay, const std::vector<std::vector<bool>>& masks,
                              size_t l) {
  std::vector<int64_t> cols;
  const GeneLayer& g = lay.layers[l];
  if (l == 0) {
    cols.resize(g.in_cols);
    std::iota(cols.begin(), cols.end(), 0);
    return cols;
  }
  for (int64_t u = 0; u < lay.layers[l - 1].units; ++u) {
    if (!masks[l - 1][u]) continue;
    for (int64_t j = 0; j < g.group; ++j) cols.push_back(u * g.group + j);
  }
  return cols;
}

std::vector<int64_t> KeptRows(const std::vector<bool>& mask) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) rows.push_back(static_cast<int64_t>(i));
  return rows;
}

// The layer above gene layer l (the next gene layer or the head).
const GeneLayer& Above(const GeneLayout& lay, size_t l) {
  return l + 1 < lay.layers.size() ? lay.layers[l + 1] : lay.head;
}

double RowNorm(absl::Span<const float> p, const GeneLayer& g, int64_t row,
               const std::vector<int64_t>& cols) {
  double s = 0;
  for (int64_t c : cols) s += std::pow(p[g.weight_offset + row * g.in_cols + c], 2);
  return std::sqrt(s);
}

// Norm of unit u's outgoing columns into `rows` of the layer above.
double OutNorm(absl::Span<const float> p, const GeneLayer& up, int64_t u,
               const std::vector<int64_t>& rows) {
  double s = 0;
  for (int64_t r : rows)
    for (int64_t j = 0; j < up.group; ++j)
      s += std::pow(p[up.weight_offset + r * up.in_cols + u * up.group + j], 2);
  return std::sqrt(s);
}

std::vector<int64_t> AllRows(int64_t n) {
  std::vector<int64_t> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

}  // namespace

absl::StatusOr<GeneLayout> GeneLayout::FromModel(const Model& model,
                                                 const std::vector<std::string>& layers,
                                                 const std::string& head) {
  if (layers.empty()) return absl::InvalidArgumentError("a learngene needs >= 1 gene layer");
  GeneLayout out;
  for (size_t l = 0; l < layers.size(); ++l) {
    TANDEM_ASSIGN_OR_RETURN(GeneLayer g, LayerOf(model, layers[l]));
    if (l > 0) {
      const int64_t below = out.layers.back().units;
      if (g.in_cols % below != 0) {
        return absl::InvalidArgumentError(absl::StrCat("gene layer ", layers[l], " has ", g.in_cols,
                                                       " inputs, not a multiple of ", below));
      }
      g.group = g.in_cols / below;
    }
    out.layers.push_back(std::move(g));
  }
  TANDEM_ASSIGN_OR_RETURN(out.head, LayerOf(model, head));
  if (out.head.in_cols != out.layers.back().units) {
    return absl::InvalidArgumentError(absl::StrCat("head ", head, " takes ", out.head.in_cols,
                                                   " inputs, last gene layer has ",
                                                   out.layers.back().units, " units"));
  }
  out.head.group = 1;
  return out;
}

int64_t Learngene::num_params() const {
  int64_t n = 0;
  for (const auto& w : weights) n += static_cast<int64_t>(w.size());
  return n;
}

absl::Status ValidateMasks(const GeneLayout& lay, const std::vector<std::vector<bool>>& masks) {
  if (masks.size() != lay.layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("learngene has ", masks.size(),
                                                   " masks for ", lay.layers.size(), " layers"));
  }
  for (size_t l = 0; l < masks.size(); ++l) {
    if (static_cast<int64_t>(masks[l].size()) != lay.layers[l].units ||
        std::none_of(masks[l].begin(), masks[l].end(), [](bool b) { return b; })) {
      return absl::InvalidArgumentError(absl::StrCat("mask of ", lay.layers[l].weight,
                                                     " must have ", lay.layers[l].units,
                                                     " entries with >= 1 kept"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Learngene> ExtractLearngene(const Model& model, const GeneLayout& lay,
                                           std::vector<std::vector<bool>> masks) {
  TANDEM_RETURN_IF_ERROR(ValidateMasks(lay, masks));
  Learngene g;
  const absl::Span<const float> p = model.params();
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const GeneLayer& gl = lay.layers[l];
    const std::vector<int64_t> rows = KeptRows(masks[l]), cols = KeptCols(lay, masks, l);
    std::vector<float> w;
    w.reserve(rows.size() * (cols.size() + 1));
    for (int64_t r : rows)
      for (int64_t c : cols) w.push_back(p[gl.weight_offset + r * gl.in_cols + c]);
    for (int64_t r : rows) w.push_back(p[gl.bias_offset + r]);
    g.weights.push_back(std::move(w));
  }
  g.masks = std::move(masks);
  return g;
}

absl::Status InsertLearngene(const Learngene& gene, const GeneLayout& lay, Model* model) {
  TANDEM_RETURN_IF_ERROR(ValidateMasks(lay, gene.masks));
  if (gene.weights.size() != lay.layers.size()) {
    return absl::InvalidArgumentError("learngene weights do not match its layers");
  }
  absl::Span<float> p = model->mutable_params();
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const GeneLayer& gl = lay.layers[l];
    const std::vector<int64_t> rows = KeptRows(gene.masks[l]), cols = KeptCols(lay, gene.masks, l);
    if (gene.weights[l].size() != rows.size() * (cols.size() + 1)) {
      return absl::InvalidArgumentError(absl::StrCat("learngene layer ", gl.weight, " has ",
                                                     gene.weights[l].size(), " values, masks need ",
                                                     rows.size() * (cols.size() + 1)));
    }
    size_t i = 0;
    for (int64_t r : rows) {
      // Isolate the circuit: inputs from units outside it start at zero.
      std::fill_n(p.begin() + gl.weight_offset + r * gl.in_cols, gl.in_cols, 0.0f);
      for (int64_t c : cols) p[gl.weight_offset + r * gl.in_cols + c] = gene.weights[l][i++];
    }
    for (int64_t r : rows) p[gl.bias_offset + r] = gene.weights[l][i++];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<bool>>> SelectCircuit(const Model& model,
                                                             const GeneLayout& lay,
                                                             double keep_fraction) {
  if (!(keep_fraction > 0 && keep_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_fraction must be in (0, 1], got ", keep_fraction));
  }
  const absl::Span<const float> p = model.params();
  std::vector<std::vector<bool>> masks;
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const GeneLayer& gl = lay.layers[l];
    masks.emplace_back(gl.units, true);  // placeholder so KeptCols sees the layers below
    const std::vector<int64_t> cols = KeptCols(lay, masks, l);
    const GeneLayer& up = Above(lay, l);
    const std::vector<int64_t> up_rows = AllRows(up.units);
    std::vector<double> score(gl.units);
    for (int64_t u = 0; u < gl.units; ++u) score[u] = RowNorm(p, gl, u, cols) * OutNorm(p, up, u, up_rows);
    std::vector<int64_t> order = AllRows(gl.units);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    const int64_t keep = static_cast<int64_t>(std::ceil(keep_fraction * gl.units));
    masks[l].assign(gl.units, false);
    for (int64_t i = 0; i < keep; ++i) masks[l][order[i]] = true;
  }
  return masks;
}

bool IsCircuit(const Model& model, const GeneLayout& lay,
               const std::vector<std::vector<bool>>& masks) {
  if (!ValidateMasks(lay, masks).ok()) return false;
  const absl::Span<const float> p = model.params();
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const std::vector<int64_t> cols = KeptCols(lay, masks, l);
    const GeneLayer& up = Above(lay, l);
    const std::vector<int64_t> up_rows =
        l + 1 < lay.layers.size() ? KeptRows(masks[l + 1]) : AllRows(up.units);
    for (int64_t u : KeptRows(masks[l])) {
      if (RowNorm(p, lay.layers[l], u, cols) == 0 || OutNorm(p, up, u, up_rows) == 0) return false;
    }
  }
  return true;
}

absl::StatusOr<Learngene> MutateLearngene(const Learngene& gene, const GeneLayout& lay,
                                          const Model& carrier, double rate, absl::BitGenRef gen) {
  if (!(rate >= 0 && rate <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("mutation rate must be in [0, 1], got ", rate));
  }
  std::unique_ptr<Model> m = carrier.Clone();
  TANDEM_RETURN_IF_ERROR(InsertLearngene(gene, lay, m.get()));
  std::vector<std::vector<bool>> masks = gene.masks;
  std::vector<std::vector<int64_t>> swapped_in(lay.layers.size());
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    std::vector<int64_t> kept = KeptRows(masks[l]), free;
    for (int64_t u = 0; u < lay.layers[l].units; ++u)
      if (!masks[l][u]) free.push_back(u);
    const int64_t n = std::min<int64_t>(std::llround(rate * static_cast<double>(kept.size())),
                                        static_cast<int64_t>(free.size()));
    std::shuffle(kept.begin(), kept.end(), gen);
    std::shuffle(free.begin(), free.end(), gen);
    for (int64_t i = 0; i < n; ++i) {
      masks[l][kept[i]] = false;
      masks[l][free[i]] = true;
      swapped_in[l].push_back(free[i]);
    }
  }
  absl::Span<float> p = m->mutable_params();
  auto he = [&](int64_t fan_in) {
    const double lim = std::sqrt(6.0 / static_cast<double>(fan_in));
    return static_cast<float>(absl::Uniform<double>(gen, -lim, lim));
  };
  for (size_t l = 0; l < lay.layers.size(); ++l) {
    const GeneLayer& gl = lay.layers[l];
    for (int64_t u : swapped_in[l]) {
      for (int64_t c = 0; c < gl.in_cols; ++c) p[gl.weight_offset + u * gl.in_cols + c] = he(gl.in_cols);
      p[gl.bias_offset + u] = 0.0f;
      if (l + 1 < lay.layers.size()) {
        const GeneLayer& up = lay.layers[l + 1];
        for (int64_t r = 0; r < up.units; ++r)
          for (int64_t j = 0; j < up.group; ++j)
            p[up.weight_offset + r * up.in_cols + u * up.group + j] = he(up.in_cols);
      }
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Learngene out, ExtractLearngene(*m, lay, std::move(masks)));
  out.score = gene.score;
  out.evaluations = gene.evaluations;
  return out;
}

void UpdateScore(Learngene* gene, double acc, double beta) {
  gene->score = gene->evaluations == 0 ? acc : beta * gene->score + (1 - beta) * acc;
  ++gene->evaluations;
}

absl::StatusOr<int64_t> Tournament(absl::Span<const double> scores, int64_t size,
                                   absl::BitGenRef gen) {
  if (scores.empty() || size < 1) {
    return absl::InvalidArgumentError("tournament needs >= 1 candidate and size >= 1");
  }
  int64_t best = -1;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t c = absl::Uniform<int64_t>(gen, 0, static_cast<int64_t>(scores.size()));
    if (best < 0 || scores[c] > scores[best]) best = c;
  }
  return best;
}

}  // namespace tandem::ml::eco
