#include "ml/train/centralized.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "ml/model/checkpoint.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const CentralizedOptions& o, const Dataset& d) {
  if (o.model == "mlp") return MakeMlp(d.features.cols(), {256, 128}, d.num_classes);
  if (o.model == "cnn") {
    CnnOptions c;
    if (d.shape.height < 16) c = {16, 32, 64};  // digits are 8x8
    return MakeCnn(d.shape, d.num_classes, c);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown model '", o.model, "' (mlp|cnn)"));
}

absl::StatusOr<std::unique_ptr<Optimizer>> BuildOptimizer(const CentralizedOptions& o) {
  if (o.optimizer == "sgd") {
    return CreateSgd({.learning_rate = o.learning_rate, .momentum = o.momentum});
  }
  if (o.optimizer == "adam") return CreateAdam({.learning_rate = o.learning_rate});
  if (o.optimizer == "dana") return CreateDana({.gamma2 = o.learning_rate});
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", o.optimizer, "' (sgd|adam|dana)"));
}

}  // namespace

absl::StatusOr<CentralizedResult> RunCentralized(
    const CentralizedOptions& o, const std::function<void(const EpochReport&)>& on_epoch) {
  if (o.epochs < 1 || o.batch_size < 1 || o.threads < 1 ||
      !(o.subset_fraction > 0 && o.subset_fraction <= 1)) {
    return absl::InvalidArgumentError("tandem-train: epochs, batch_size, threads must be >= 1 and "
                                      "subset_fraction in (0, 1]");
  }
  Dataset train, test;
  if (o.dataset == "fmnist") {
    TANDEM_ASSIGN_OR_RETURN(train, LoadFashionMnist(o.fmnist_dir, "train", o.max_train));
    TANDEM_ASSIGN_OR_RETURN(test, LoadFashionMnist(o.fmnist_dir, "t10k"));
  } else if (o.dataset == "digits") {
    TANDEM_ASSIGN_OR_RETURN(Dataset all, LoadDigitsCsv(o.digits_csv));
    TANDEM_ASSIGN_OR_RETURN(auto split, TrainTestSplit(all, 0.25, 1234));
    train = std::move(split.first);
    test = std::move(split.second);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown dataset '", o.dataset, "' (fmnist|digits)"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(o.threads));
  std::mt19937_64 gen(o.seed);
  const Clock& clock = *RealClock::Default();
  CentralizedResult result;

  std::vector<int64_t> indices(static_cast<size_t>(train.size()));
  std::iota(indices.begin(), indices.end(), 0);
  if (o.subset == "random" || o.subset == "coido") {
    std::vector<int64_t> shuffled = indices;
    std::mt19937_64 sub_gen(o.seed + 1);
    std::shuffle(shuffled.begin(), shuffled.end(), sub_gen);
    shuffled.resize(static_cast<size_t>(std::llround(o.subset_fraction * train.size())));
    std::sort(shuffled.begin(), shuffled.end());
    if (o.subset == "random") {
      indices = shuffled;
    } else {
      // Embedding model: same architecture, trained briefly on the random subset.
      const absl::Time start = clock.Now();
      TANDEM_ASSIGN_OR_RETURN(auto warm, BuildModel(o, train));
      warm->InitFromSeed(o.seed + 2);
      TANDEM_ASSIGN_OR_RETURN(auto warm_opt, BuildOptimizer(o));
      for (int e = 0; e < o.coido_warmup_epochs; ++e) {
        TANDEM_RETURN_IF_ERROR(TrainEpoch(*warm, *warm_opt, *engine, train, shuffled,
                                          {o.batch_size}, gen, clock).status());
      }
      TANDEM_ASSIGN_OR_RETURN(EmbeddingsAndLosses el, engine->EmbedAndLoss(*warm, train));
      CoidoOptions co;
      co.select_fraction = o.subset_fraction;
      co.direction = o.coido_direction;
      co.seed = o.seed + 3;
      TANDEM_ASSIGN_OR_RETURN(CoidoResult cr,
                              CoidoSelect(el.embeddings, el.losses, train.labels, train.num_classes, co));
      indices = std::move(cr.selected);
      result.selection_seconds = absl::ToDoubleSeconds(clock.Now() - start);
    }
  } else if (o.subset != "full") {
    return absl::InvalidArgumentError(absl::StrCat("unknown subset '", o.subset, "' (full|random|coido)"));
  }

  TANDEM_ASSIGN_OR_RETURN(auto model, BuildModel(o, train));
  model->InitFromSeed(o.seed);
  TANDEM_ASSIGN_OR_RETURN(auto opt, BuildOptimizer(o));
  result.train_size = static_cast<int64_t>(indices.size());
  result.num_params = model->num_params();
  result.forward_flops_per_sample = ForwardFlopsPerSample(*model);
  for (int e = 1; e <= o.epochs; ++e) {
    EpochReport rep;
    rep.epoch = e;
    TANDEM_ASSIGN_OR_RETURN(rep.train,
                            TrainEpoch(*model, *opt, *engine, train, indices, {o.batch_size}, gen, clock));
    TANDEM_ASSIGN_OR_RETURN(rep.test, engine->Evaluate(*model, test));
    if (on_epoch) on_epoch(rep);
    result.epochs.push_back(rep);
  }
  if (!o.checkpoint_out.empty()) TANDEM_RETURN_IF_ERROR(SaveCheckpoint(*model, o.checkpoint_out));
  return result;
}

}  // namespace tandem::ml
