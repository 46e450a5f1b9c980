#include "ml/fedluar/federated_sim.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/optim/optimizer.h"
#include "ml/train/trainer.h"

namespace tandem::ml {

std::vector<TensorSlice> TensorSlices(const std::vector<ParamInfo>& layout) {
  std::vector<TensorSlice> out;
  for (const ParamInfo& p : layout) out.push_back({p.name, p.offset, p.size, p.recyclable()});
  return out;
}

std::vector<TensorSlice> TensorSlices(const Model& model) {
  return TensorSlices(model.param_infos());
}

absl::StatusOr<FederatedResult> SimulateFederated(const Model& initial,
                                                  const std::vector<Dataset>& clients,
                                                  const Dataset& test,
                                                  const FederatedOptions& o) {
  if (o.rounds < 1 || o.clients_per_round < 1 ||
      o.clients_per_round > static_cast<int>(clients.size()) || o.local_steps < 1 ||
      o.batch_size < 1 || !(o.server_lr > 0) || o.eval_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "federated sim: need rounds >= 1, 1 <= clients_per_round <= ", clients.size(),
        ", local_steps >= 1, batch_size >= 1, server_lr > 0, eval_every >= 1"));
  }
  for (size_t c = 0; c < clients.size(); ++c) {
    if (clients[c].size() == 0 || clients[c].features.cols() != initial.input_size()) {
      return absl::InvalidArgumentError(absl::StrCat("federated sim: client ", c,
                                                     " has no data or the wrong feature width"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(auto engine, GradientEngine::Create(o.num_threads));
  FedLuarOptions lo;
  lo.num_recycled = o.algorithm == FederatedAlgorithm::kFedLuar ? o.num_recycled : 0;
  lo.seed = o.seed;
  TANDEM_ASSIGN_OR_RETURN(auto luar,
                          FedLuarState::Create(TensorSlices(initial), initial.num_params(), lo));

  std::unique_ptr<Model> global = initial.Clone();
  std::mt19937_64 gen(o.seed);
  std::vector<int> ids(clients.size());
  std::iota(ids.begin(), ids.end(), 0);
  FederatedResult result;
  const size_t n = static_cast<size_t>(global->num_params());
  for (int round = 1; round <= o.rounds; ++round) {
    RoundMetrics m;
    m.round = round;
    for (size_t t : luar->recycled()) m.recycled.push_back(luar->tensors()[t].name);
    std::shuffle(ids.begin(), ids.end(), gen);
    std::vector<double> sum(static_cast<size_t>(luar->packed_size()), 0.0);
    for (int k = 0; k < o.clients_per_round; ++k) {
      std::unique_ptr<Model> local = global->Clone();
      SgdOptions so;
      so.learning_rate = o.client_lr;
      so.momentum = o.client_momentum;
      TANDEM_ASSIGN_OR_RETURN(auto opt, CreateSgd(so));
      std::mt19937_64 client_gen(gen());
      TANDEM_RETURN_IF_ERROR(TrainSteps(*local, *opt, *engine, clients[ids[k]], o.local_steps,
                                        o.batch_size, client_gen));
      std::vector<float> update(n);
      for (size_t i = 0; i < n; ++i) update[i] = local->params()[i] - global->params()[i];
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> packed, luar->PackUpdate(update));
      m.bytes_uploaded += static_cast<int64_t>(packed.size() * sizeof(float));
      for (size_t i = 0; i < packed.size(); ++i) sum[i] += packed[i];
    }
    std::vector<float> mean(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / o.clients_per_round);
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> full, luar->FinishRound(global->params(), mean));
    absl::Span<float> w = global->mutable_params();
    for (size_t i = 0; i < n; ++i) w[i] += static_cast<float>(o.server_lr) * full[i];
    if (round % o.eval_every == 0 || round == o.rounds) {
      TANDEM_ASSIGN_OR_RETURN(EvalStats e, engine->Evaluate(*global, test));
      m.test_accuracy = e.accuracy;
      m.test_loss = e.loss;
      result.final_accuracy = e.accuracy;
    }
    result.total_bytes += m.bytes_uploaded;
    result.rounds.push_back(std::move(m));
  }
  result.final_params = global->Flatten();
  return result;
}

}  // namespace tandem::ml
