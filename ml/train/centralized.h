// Centralised training run behind tandem-train: load a data set, optionally
// pick a training subset (random or CoIDO), train, evaluate every epoch.
// The binary is a thin flag parser over RunCentralized().
#ifndef TANDEM_ML_TRAIN_CENTRALIZED_H_
#define TANDEM_ML_TRAIN_CENTRALIZED_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ml/coido/coido.h"
#include "ml/train/trainer.h"

namespace tandem::ml {

struct CentralizedOptions {
  std::string dataset = "digits";  // "digits" | "fmnist"
  std::string model = "mlp";       // "mlp" | "cnn"
  std::string fmnist_dir = kFashionMnistDir;
  std::string digits_csv = kDigitsCsv;
  int64_t max_train = 0;           // > 0: use only the first N training rows
  int epochs = 5;
  int64_t batch_size = 64;
  std::string optimizer = "adam";  // "sgd" | "adam" | "dana"
  double learning_rate = 1e-3;
  double momentum = 0.9;           // sgd only
  int threads = 1;
  uint64_t seed = 1;
  std::string subset = "full";     // "full" | "random" | "coido"
  double subset_fraction = 0.2;
  int coido_warmup_epochs = 1;     // epochs of the embedding model on a random subset
  CoidoOptions::Direction coido_direction = CoidoOptions::Direction::kHardest;
  std::string checkpoint_out;      // written after the last epoch when non-empty
};

struct EpochReport {
  int epoch = 0;
  EpochStats train;
  EvalStats test;
};

struct CentralizedResult {
  int64_t train_size = 0;  // samples actually trained on
  int64_t num_params = 0;
  double forward_flops_per_sample = 0;
  double selection_seconds = 0;  // warm-up + CoIDO (0 otherwise)
  std::vector<EpochReport> epochs;
};

// Runs the whole thing; `on_epoch` (may be empty) is called after each
// epoch. Returns INVALID_ARGUMENT for unknown names or bad numbers, and the
// readers' errors (NOT_FOUND naming deploy/install-deps.sh) for missing data.
absl::StatusOr<CentralizedResult> RunCentralized(
    const CentralizedOptions& options, const std::function<void(const EpochReport&)>& on_epoch);

}  // namespace tandem::ml

#endif  // TANDEM_ML_TRAIN_CENTRALIZED_H_
