// Learngenes of ECO / Genetic Transfer Learning (Feng et al., "Evolving Core
// Knowledge for Efficient Transfer", NeurIPS 2025; GTL, arXiv 2401.08139;
// kernels_research.md section 1): the part of a trained network passed to
// the next generation, as a circuit of kept units with their weights.
//
// The network is a chain of "gene layers" (conv1 channels, conv2 channels,
// fc1 units of ml::MakeCnn); layer l's weight is [units_l, units_{l-1} *
// group_l] (group = k*k for a conv, the pooled spatial size for the first
// dense layer), so a kept unit u of layer l owns the sub-tensor
// W_l[u, kept units of l-1 (each a group of columns)] and b_l[u] [I, the
// spec's W_l[m_l, m_{l-1}, :, :]]. The first gene layer keeps every input
// column; the classifier head (layer "out") is never inherited, since the
// descendant's classes differ [I].
//
// Circuit [I]: every gene layer keeps >= 1 unit, every kept unit has a
// non-zero incoming weight from a kept unit of the layer below (or the
// input) and a non-zero outgoing weight to a kept unit of the layer above
// (or to the classifier head).
// Extraction [I]: layer by layer from the input, unit importance =
// |incoming weights from kept units|_2 * |outgoing weights|_2, keep the
// ceil(keep_fraction * units) most important (ties: lower index).
// Mutation (Alg. 1) [I, spec]: per layer swap round(rate * kept) kept units
// for random unkept ones; the swapped-in units' entries (incoming row,
// bias, outgoing columns into kept units) are re-initialised He-uniform.
// Score (Alg. 3) [I]: EMA score <- beta score + (1 - beta) acc (the first
// evaluation sets it). Selection: tournament of size s with replacement.
//
// Thread safety: value types and pure functions (BitGenRef is caller-owned).
#ifndef TANDEM_ML_ECO_LEARNGENE_H_
#define TANDEM_ML_ECO_LEARNGENE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/model.h"

namespace tandem::ml::eco {

struct GeneLayer {
  std::string weight, bias;  // param names, e.g. "conv2.weight"
  int64_t units = 0;         // rows of the weight
  int64_t group = 0;         // columns per unit of the layer below (0: first layer)
  int64_t in_cols = 0;       // total columns
  int64_t weight_offset = 0, bias_offset = 0;  // into the flat parameter vector
};

// The gene chain of a model, found by name: `layers` weight/bias prefixes in
// order (e.g. {"conv1", "conv2", "fc1"}) followed by the head `head` (its
// weight columns must equal the last layer's units). INVALID_ARGUMENT when a
// name is missing or the column counts do not chain.
struct GeneLayout {
  std::vector<GeneLayer> layers;
  GeneLayer head;
  static absl::StatusOr<GeneLayout> FromModel(const Model& model,
                                              const std::vector<std::string>& layers,
                                              const std::string& head);
};

struct Learngene {
  std::vector<std::vector<bool>> masks;     // per gene layer, units_l entries
  std::vector<std::vector<float>> weights;  // per gene layer: kept rows x kept cols, then kept biases
  double score = 0;
  int64_t evaluations = 0;
  // Kept parameter count (sum of weights[l].size()).
  int64_t num_params() const;
};

// INVALID_ARGUMENT unless masks fit the layout and each keeps >= 1 unit.
absl::Status ValidateMasks(const GeneLayout& layout, const std::vector<std::vector<bool>>& masks);

// The kept sub-tensors of `model` under `masks`. Errors as ValidateMasks.
absl::StatusOr<Learngene> ExtractLearngene(const Model& model, const GeneLayout& layout,
                                           std::vector<std::vector<bool>> masks);
// Writes the kept sub-tensors into `model` (not owned) and zeroes the
// weights from units outside the circuit into kept units, so the inherited
// circuit computes what it computed in its parent [I: the sources do not say
// how the remaining random weights meet the learngene; without this the
// random units below pollute every kept unit]. All other parameters stay
// as they are. INVALID_ARGUMENT when the learngene does not fit the layout.
absl::Status InsertLearngene(const Learngene& gene, const GeneLayout& layout, Model* model);

// Importance-ranked circuit masks of a trained model (see header),
// keep_fraction in (0, 1]. INVALID_ARGUMENT otherwise.
absl::StatusOr<std::vector<std::vector<bool>>> SelectCircuit(const Model& model,
                                                             const GeneLayout& layout,
                                                             double keep_fraction);
// True when the masks form a circuit in `model`'s current weights.
bool IsCircuit(const Model& model, const GeneLayout& layout,
               const std::vector<std::vector<bool>>& masks);

// Alg. 1 on a copy of `gene`; `carrier` provides the architecture (its
// parameters are not read). rate in [0, 1]; rate 0 returns the gene
// unchanged. INVALID_ARGUMENT on a bad rate or a gene not fitting the layout.
absl::StatusOr<Learngene> MutateLearngene(const Learngene& gene, const GeneLayout& layout,
                                          const Model& carrier, double rate, absl::BitGenRef gen);

// Alg. 3: EMA update of gene->score with accuracy acc (REQUIRES: gene non-null).
void UpdateScore(Learngene* gene, double acc, double beta);

// Draws `size` indices uniformly (with replacement) from [0, scores.size())
// and returns the one with the highest score (first drawn among ties).
// INVALID_ARGUMENT when scores is empty or size < 1.
absl::StatusOr<int64_t> Tournament(absl::Span<const double> scores, int64_t size,
                                   absl::BitGenRef gen);

}  // namespace tandem::ml::eco

#endif  // TANDEM_ML_ECO_LEARNGENE_H_
