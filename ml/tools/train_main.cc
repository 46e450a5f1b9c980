// tandem-train: centralised training on the Debian-packaged data sets.
//   tandem-train --dataset=fmnist --model=cnn --epochs=5 --threads=2
//   tandem-train --dataset=fmnist --model=cnn --subset=coido --subset_fraction=0.2
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ml/train/centralized.h"

ABSL_FLAG(std::string, dataset, "digits", "fmnist | digits");
ABSL_FLAG(std::string, model, "mlp", "mlp | cnn");
ABSL_FLAG(int, epochs, 5, "training epochs");
ABSL_FLAG(int64_t, batch_size, 64, "mini-batch size");
ABSL_FLAG(std::string, optimizer, "adam", "sgd | adam | dana");
ABSL_FLAG(double, lr, 1e-3, "learning rate (DANA: gamma2)");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum");
ABSL_FLAG(int, threads, 1, "gradient shards / oneTBB threads");
ABSL_FLAG(uint64_t, seed, 1, "seed of init, shuffling and subsets");
ABSL_FLAG(std::string, subset, "full", "full | random | coido");
ABSL_FLAG(double, subset_fraction, 0.2, "fraction kept by random/coido");
ABSL_FLAG(std::string, coido_direction, "hardest", "hardest (paper) | easiest");
ABSL_FLAG(int64_t, max_train, 0, "use only the first N training rows (0 = all)");
ABSL_FLAG(std::string, fmnist_dir, tandem::ml::kFashionMnistDir, "Fashion-MNIST IDX folder");
ABSL_FLAG(std::string, digits_csv, tandem::ml::kDigitsCsv, "sklearn digits.csv.gz");
ABSL_FLAG(std::string, checkpoint_out, "", "write a checkpoint after training");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  tandem::ml::CentralizedOptions o;
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.model = absl::GetFlag(FLAGS_model);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.optimizer = absl::GetFlag(FLAGS_optimizer);
  o.learning_rate = absl::GetFlag(FLAGS_lr);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.subset = absl::GetFlag(FLAGS_subset);
  o.subset_fraction = absl::GetFlag(FLAGS_subset_fraction);
  const std::string dir = absl::GetFlag(FLAGS_coido_direction);
  if (dir != "hardest" && dir != "easiest") {
    std::fprintf(stderr, "tandem-train: --coido_direction must be hardest or easiest\n");
    return 2;
  }
  o.coido_direction = dir == "hardest" ? tandem::ml::CoidoOptions::Direction::kHardest
                                       : tandem::ml::CoidoOptions::Direction::kEasiest;
  o.max_train = absl::GetFlag(FLAGS_max_train);
  o.fmnist_dir = absl::GetFlag(FLAGS_fmnist_dir);
  o.digits_csv = absl::GetFlag(FLAGS_digits_csv);
  o.checkpoint_out = absl::GetFlag(FLAGS_checkpoint_out);

  auto result = tandem::ml::RunCentralized(o, [](const tandem::ml::EpochReport& r) {
    std::printf("epoch %d  train_loss %.4f  train_acc %.4f  test_loss %.4f  test_acc %.4f  "
                "%.0f samples/s  (%.1f s)\n",
                r.epoch, r.train.loss, r.train.accuracy, r.test.loss, r.test.accuracy,
                r.train.samples_per_second, r.train.seconds);
    std::fflush(stdout);
  });
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-train: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("done: %lld training samples, %lld parameters, %.2f MFLOP forward/sample, "
              "selection %.1f s, final test_acc %.4f\n",
              static_cast<long long>(result->train_size), static_cast<long long>(result->num_params),
              result->forward_flops_per_sample / 1e6, result->selection_seconds,
              result->epochs.back().test.accuracy);
  return 0;
}
