// tandem-eco: evolves a learngene on digits classes 0-4 (ECO / GTL) and
// reports how fast descendants on the held-out classes 5-9 learn from it
// compared with random initialisation (same seeds and batches).
//
//   build/ml/eco/tandem-eco --population=6 --generations=3 --seed=1
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "ml/data/dataset.h"
#include "ml/eco/genetic_transfer.h"

ABSL_FLAG(int64_t, population, 6, "individuals per generation");
ABSL_FLAG(int64_t, generations, 3, "generations");
ABSL_FLAG(int64_t, tournament, 3, "tournament size");
ABSL_FLAG(double, keep_fraction, 0.45, "kept units per gene layer");
ABSL_FLAG(double, mutation_rate, 0.2, "fraction of kept units swapped per mutation");
ABSL_FLAG(int64_t, critic_per_class, 30, "critic training rows per held-out class");
ABSL_FLAG(int64_t, shots, 10, "descendant training rows per held-out class");
ABSL_FLAG(int64_t, epochs, 5, "descendant training epochs");
ABSL_FLAG(int64_t, seeds, 5, "descendant repetitions per initialisation");
ABSL_FLAG(uint64_t, seed, 1, "seed of the whole experiment");
ABSL_FLAG(std::string, digits_csv, tandem::ml::kDigitsCsv, "sklearn digits CSV");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("ECO learngene evolution and transfer on sklearn digits");
  absl::ParseCommandLine(argc, argv);
  namespace eco = tandem::ml::eco;
  auto data = tandem::ml::LoadDigitsCsv(absl::GetFlag(FLAGS_digits_csv));
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", std::string(data.status().message()).c_str());
    return 1;
  }
  auto split = tandem::ml::TrainTestSplit(*data, 0.2, absl::GetFlag(FLAGS_seed));
  if (!split.ok()) return 1;
  auto tasks = eco::MakeDigitsTasks(split->first, split->second,
                                    absl::GetFlag(FLAGS_critic_per_class), absl::GetFlag(FLAGS_shots));
  if (!tasks.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tasks.status().message()).c_str());
    return 1;
  }
  eco::EcoOptions o;
  o.population = absl::GetFlag(FLAGS_population);
  o.generations = absl::GetFlag(FLAGS_generations);
  o.tournament = absl::GetFlag(FLAGS_tournament);
  o.keep_fraction = absl::GetFlag(FLAGS_keep_fraction);
  o.mutation_rate = absl::GetFlag(FLAGS_mutation_rate);
  o.seed = absl::GetFlag(FLAGS_seed);
  auto evolved = eco::EvolveLearngene(*tasks, o);
  if (!evolved.ok()) {
    std::fprintf(stderr, "%s\n", std::string(evolved.status().message()).c_str());
    return 1;
  }
  for (size_t g = 0; g < evolved->best_score_per_generation.size(); ++g) {
    std::printf("generation %zu: best critic score %.4f\n", g, evolved->best_score_per_generation[g]);
  }
  std::printf("learngene: %lld parameters (%.1f%% of the network)\n",
              static_cast<long long>(evolved->best.num_params()),
              100 * evolved->learngene_fraction);
  auto curve = eco::CompareInitialisations(*tasks, evolved->best, o, absl::GetFlag(FLAGS_epochs),
                                           absl::GetFlag(FLAGS_seeds));
  if (!curve.ok()) {
    std::fprintf(stderr, "%s\n", std::string(curve.status().message()).c_str());
    return 1;
  }
  std::printf("epoch  learngene_acc  random_acc   (classes 5-9, %lld shots/class, mean of %lld)\n",
              static_cast<long long>(absl::GetFlag(FLAGS_shots)),
              static_cast<long long>(absl::GetFlag(FLAGS_seeds)));
  for (size_t e = 0; e < curve->random_accuracy.size(); ++e) {
    std::printf("%5zu  %13.4f  %10.4f\n", e + 1, curve->learngene_accuracy[e],
                curve->random_accuracy[e]);
  }
  return 0;
}
