#include "ml/eco/genetic_transfer.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/status_macros.h"
#include "ml/optim/optimizer.h"
#include "ml/train/trainer.h"

namespace tandem::ml::eco {
namespace {

constexpr int kClasses = 5;

// Rows of `d` with label in [lo, lo + 5), relabelled to 0..4; `pick(rank,
// label)` decides per class-rank whether a row is taken.
template <typename Pick>
absl::StatusOr<Dataset> ClassSubset(const Dataset& d, int lo, Pick pick) {
  std::vector<int64_t> rows;
  std::vector<int64_t> rank(10, 0);
  for (int64_t i = 0; i < d.size(); ++i) {
    const int l = d.labels[i];
    if (l < lo || l >= lo + kClasses) continue;
    if (pick(rank[l]++)) rows.push_back(i);
  }
  TANDEM_ASSIGN_OR_RETURN(Dataset out, d.Subset(rows));
  for (int& l : out.labels) l -= lo;
  out.num_classes = kClasses;
  return out;
}

absl::StatusOr<std::unique_ptr<Model>> NewNet(const EcoOptions& o, uint64_t seed) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, MakeCnn({1, 8, 8}, kClasses, o.cnn));
  m->InitFromSeed(seed);
  return m;
}

// `epochs` of SGD (momentum 0.9) over all of `data`, batch order from `seed`.
absl::Status Train(Model& m, const Dataset& data, int64_t epochs, const EcoOptions& o,
                   uint64_t seed, GradientEngine& engine) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                          CreateSgd({.learning_rate = o.learning_rate, .momentum = 0.9}));
  std::mt19937_64 gen(seed);
  std::vector<int64_t> all(data.size());
  std::iota(all.begin(), all.end(), 0);
  for (int64_t e = 0; e < epochs; ++e) {
    TANDEM_RETURN_IF_ERROR(TrainEpoch(m, *opt, engine, data, all, {.batch_size = o.batch_size},
                                      gen, *RealClock::Default())
                               .status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GeneLayout> CnnGeneLayout(const Model& model) {
  return GeneLayout::FromModel(model, {"conv1", "conv2", "fc1"}, "out");
}

absl::StatusOr<EcoTasks> MakeDigitsTasks(const Dataset& train, const Dataset& test,
                                         int64_t critic_per_class, int64_t shots_per_class) {
  if (train.num_classes != 10 || test.num_classes != 10 || critic_per_class < 1 ||
      critic_per_class > 200 || shots_per_class < 1 || shots_per_class > 200) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ECO digits tasks need 10-class data and per-class counts in [1, 200], got ",
        critic_per_class, " and ", shots_per_class));
  }
  EcoTasks t;
  TANDEM_ASSIGN_OR_RETURN(t.evolution_train, ClassSubset(train, 0, [](int64_t) { return true; }));
  TANDEM_ASSIGN_OR_RETURN(t.critic_train, ClassSubset(train, 5, [&](int64_t r) {
                            return r < critic_per_class;
                          }));
  TANDEM_ASSIGN_OR_RETURN(t.descendant_train, ClassSubset(train, 5, [&](int64_t r) {
                            return r >= critic_per_class && r < critic_per_class + shots_per_class;
                          }));
  TANDEM_ASSIGN_OR_RETURN(t.critic_test, ClassSubset(test, 5, [](int64_t r) { return r % 2 == 0; }));
  TANDEM_ASSIGN_OR_RETURN(t.descendant_test,
                          ClassSubset(test, 5, [](int64_t r) { return r % 2 == 1; }));
  if (t.descendant_train.size() < kClasses * shots_per_class ||
      t.critic_train.size() < kClasses * critic_per_class) {
    return absl::InvalidArgumentError("ECO digits tasks: too few training rows per class");
  }
  return t;
}

absl::Status ValidateEcoOptions(const EcoOptions& o) {
  if (o.population < 1 || o.population > 256 || o.generations < 1 || o.generations > 64 ||
      o.tournament < 1 || !(o.keep_fraction > 0 && o.keep_fraction <= 1) ||
      !(o.mutation_rate >= 0 && o.mutation_rate <= 1) ||
      !(o.score_beta >= 0 && o.score_beta < 1) || o.evolution_epochs < 1 ||
      o.critic_epochs < 1 || o.batch_size < 1 || !(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ECO options out of range: population=", o.population, " generations=", o.generations,
        " tournament=", o.tournament, " keep_fraction=", o.keep_fraction,
        " mutation_rate=", o.mutation_rate, " beta=", o.score_beta, " lr=", o.learning_rate));
  }
  return absl::OkStatus();
}

absl::StatusOr<EcoResult> EvolveLearngene(const EcoTasks& tasks, const EcoOptions& o) {
  TANDEM_RETURN_IF_ERROR(ValidateEcoOptions(o));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GradientEngine> engine, GradientEngine::Create(1));
  std::mt19937_64 master(o.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> proto_net, NewNet(o, 0));
  TANDEM_ASSIGN_OR_RETURN(GeneLayout layout, CnnGeneLayout(*proto_net));
  std::vector<Learngene> population(o.population);  // empty masks: no inheritance yet
  EcoResult result;
  for (int64_t g = 0; g < o.generations; ++g) {
    std::vector<Learngene> children;
    std::vector<double> scores;
    for (int64_t i = 0; i < o.population; ++i) {
      const uint64_t init_seed = master(), order_seed = master(), critic_seed = master();
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> net, NewNet(o, init_seed));
      const Learngene& parent = population[i];
      if (!parent.masks.empty()) TANDEM_RETURN_IF_ERROR(InsertLearngene(parent, layout, net.get()));
      TANDEM_RETURN_IF_ERROR(Train(*net, tasks.evolution_train, o.evolution_epochs, o, order_seed,
                                   *engine));
      // The circuit is inherited; generation 0 selects it from its trained net.
      std::vector<std::vector<bool>> masks = parent.masks;
      if (masks.empty()) {
        TANDEM_ASSIGN_OR_RETURN(masks, SelectCircuit(*net, layout, o.keep_fraction));
      }
      TANDEM_ASSIGN_OR_RETURN(Learngene child, ExtractLearngene(*net, layout, std::move(masks)));
      child.score = parent.score;
      child.evaluations = parent.evaluations;
      TANDEM_ASSIGN_OR_RETURN(child, MutateLearngene(child, layout, *net, o.mutation_rate, master));
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> critic, NewNet(o, critic_seed));
      TANDEM_RETURN_IF_ERROR(InsertLearngene(child, layout, critic.get()));
      TANDEM_RETURN_IF_ERROR(Train(*critic, tasks.critic_train, o.critic_epochs, o, critic_seed,
                                   *engine));
      TANDEM_ASSIGN_OR_RETURN(EvalStats ev, engine->Evaluate(*critic, tasks.critic_test));
      UpdateScore(&child, ev.accuracy, o.score_beta);
      scores.push_back(child.score);
      children.push_back(std::move(child));
    }
    const int64_t best = std::max_element(scores.begin(), scores.end()) - scores.begin();
    result.best = children[best];
    result.best_score_per_generation.push_back(scores[best]);
    for (int64_t i = 0; i < o.population; ++i) {
      TANDEM_ASSIGN_OR_RETURN(int64_t pick, Tournament(scores, o.tournament, master));
      population[i] = children[pick];
    }
  }
  result.learngene_fraction =
      static_cast<double>(result.best.num_params()) / static_cast<double>(proto_net->num_params());
  return result;
}

absl::StatusOr<TransferCurve> CompareInitialisations(const EcoTasks& tasks, const Learngene& gene,
                                                     const EcoOptions& o, int64_t epochs,
                                                     int64_t seeds) {
  if (epochs < 1 || epochs > 100 || seeds < 1 || seeds > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("epochs and seeds must be in [1, 100], got ", epochs, " and ", seeds));
  }
  TANDEM_RETURN_IF_ERROR(ValidateEcoOptions(o));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GradientEngine> engine, GradientEngine::Create(1));
  TransferCurve curve;
  curve.learngene_accuracy.assign(epochs, 0.0);
  curve.random_accuracy.assign(epochs, 0.0);
  for (int64_t s = 0; s < seeds; ++s) {
    for (bool inherit : {true, false}) {
      const uint64_t seed = o.seed * 1000003 + static_cast<uint64_t>(s);
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> net, NewNet(o, seed));
      if (inherit) {
        TANDEM_ASSIGN_OR_RETURN(GeneLayout layout, CnnGeneLayout(*net));
        TANDEM_RETURN_IF_ERROR(InsertLearngene(gene, layout, net.get()));
      }
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                              CreateSgd({.learning_rate = o.learning_rate, .momentum = 0.9}));
      std::mt19937_64 gen(seed + 17);
      std::vector<int64_t> all(tasks.descendant_train.size());
      std::iota(all.begin(), all.end(), 0);
      for (int64_t e = 0; e < epochs; ++e) {
        TANDEM_RETURN_IF_ERROR(TrainEpoch(*net, *opt, *engine, tasks.descendant_train, all,
                                          {.batch_size = o.batch_size}, gen, *RealClock::Default())
                                   .status());
        TANDEM_ASSIGN_OR_RETURN(EvalStats ev, engine->Evaluate(*net, tasks.descendant_test));
        (inherit ? curve.learngene_accuracy : curve.random_accuracy)[e] += ev.accuracy / seeds;
      }
    }
  }
  return curve;
}

}  // namespace tandem::ml::eco
