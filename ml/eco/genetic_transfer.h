// ECO's genetic transfer loop (Alg. 2) and the learngene-vs-random
// initialisation experiment on the sklearn digits (kernels_research.md
// section 1; Feng et al., NeurIPS 2025; GTL arXiv 2401.08139).
//
// One generation, for each individual i of the population [F: GTL/ECO]:
//   1. network = random init + inherited learngene (none in generation 0);
//      train on the evolution task;
//   2. extract the learngene from the trained network under the inherited
//      circuit (generation 0: SelectCircuit on the trained network) [I];
//   3. mutate it (Alg. 1);
//   4. insert it into a fresh critic network, train it briefly on the
//      held-out critic classes; its test accuracy updates the score (Alg. 3);
//   5. the next population is P tournament draws among the new learngenes.
// The best-scored learngene of the last generation is returned.
//
// Tasks on digits (1 x 8 x 8, 10 classes) [I]: evolution = classes 0-4
// (all their training rows); critic = classes 5-9, `critic_per_class`
// training rows each and the even-numbered test rows; descendant = classes
// 5-9, the next `shots_per_class` training rows each (disjoint from the
// critic's) and the odd-numbered test rows. Every task relabels to 0..4, so
// all networks are MakeCnn(1x8x8, 5 classes).
//
// Thread safety: functions own their state; one call at a time per engine.
#ifndef TANDEM_ML_ECO_GENETIC_TRANSFER_H_
#define TANDEM_ML_ECO_GENETIC_TRANSFER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/data/dataset.h"
#include "ml/eco/learngene.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml::eco {

struct EcoTasks {
  Dataset evolution_train;
  Dataset critic_train, critic_test;
  Dataset descendant_train, descendant_test;
};

// Builds the tasks above from a (train, test) split of digits.
// INVALID_ARGUMENT when the data is not 10-class or has too few rows per
// class; per-class counts in [1, 200].
absl::StatusOr<EcoTasks> MakeDigitsTasks(const Dataset& train, const Dataset& test,
                                         int64_t critic_per_class, int64_t shots_per_class);

struct EcoOptions {
  int64_t population = 6;
  int64_t generations = 3;
  int64_t tournament = 3;
  double keep_fraction = 0.45;  // per gene layer; ~20% of the CNN's parameters [F: GTL ~20%]
  double mutation_rate = 0.2;
  double score_beta = 0.9;      // EMA of critic accuracies
  int64_t evolution_epochs = 3;
  int64_t critic_epochs = 2;
  int64_t batch_size = 32;
  double learning_rate = 0.05;  // SGD, momentum 0.9
  CnnOptions cnn{16, 32, 64};
  uint64_t seed = 1;
};

// INVALID_ARGUMENT for out-of-range options (sizes >= 1, population <= 256,
// generations <= 64, rates in range, lr > 0).
absl::Status ValidateEcoOptions(const EcoOptions& o);

struct EcoResult {
  Learngene best;
  std::vector<double> best_score_per_generation;
  double learngene_fraction = 0;  // kept parameters / all parameters of a network
};

// Runs the generational loop. Errors as ValidateEcoOptions or from training.
absl::StatusOr<EcoResult> EvolveLearngene(const EcoTasks& tasks, const EcoOptions& o);

struct TransferCurve {
  std::vector<double> learngene_accuracy;  // mean test accuracy after each epoch
  std::vector<double> random_accuracy;
};

// Trains descendants on the descendant task for `epochs` epochs, `seeds`
// times each, from (a) random init + `gene` and (b) random init only, with
// the same seeds and batch order; returns the mean test accuracy after every
// epoch. INVALID_ARGUMENT for epochs or seeds outside [1, 100].
absl::StatusOr<TransferCurve> CompareInitialisations(const EcoTasks& tasks, const Learngene& gene,
                                                     const EcoOptions& o, int64_t epochs,
                                                     int64_t seeds);

// The gene layers of MakeCnn: {"conv1", "conv2", "fc1"} with head "out".
absl::StatusOr<GeneLayout> CnnGeneLayout(const Model& model);

}  // namespace tandem::ml::eco

#endif  // TANDEM_ML_ECO_GENETIC_TRANSFER_H_
