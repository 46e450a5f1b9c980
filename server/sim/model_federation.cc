#include "server/sim/model_federation.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "server/core/federated_task.h"
#include "server/sim/client_memory.h"
#include "server/sim/private_mean.h"

namespace tandem::sim {

absl::StatusOr<ModelFederationResult> RunModelFederation(
    const FederationOptions& o, const ExternalModel& model, const LocalTrainFn& train,
    const EvaluateFn& evaluate, const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress) {
  if (o.rounds < 1 || o.clients < 1 || !(o.sample_rate > 0) || o.sample_rate > 1) {
    return absl::InvalidArgumentError("rounds, clients >= 1 and sample_rate in (0, 1] required");
  }
  if (!train) return absl::InvalidArgumentError("a local training step is required");
  if (model.initial_params.empty()) return absl::InvalidArgumentError("the model is empty");
  // The coordinator's side: model, FedLUAR, server optimizer, accountant.
  TANDEM_ASSIGN_OR_RETURN(const server::FederatedTaskOptions to,
                          SimTaskOptions(o, model.initial_params.size()));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<server::FederatedTask> coordinator,
                          server::FederatedTask::Create(to, model.tensors, model.initial_params));
  const int64_t run_start_ms = absl::ToUnixMillis(absl::Now());

  std::mt19937_64 gen(o.seed * 7919 + 1);
  ClientMemories memories;  // the clients' error feedback (TOP_NORM rounds)
  ModelFederationResult result;
  for (int round = 1; round <= o.rounds; ++round) {
    const absl::Time start = absl::Now();
    absl::StatusOr<server::RoundPlan> plan = coordinator->PlanRound();
    if (absl::IsResourceExhausted(plan.status())) break;  // privacy budget spent
    if (!plan.ok()) return plan.status();
    RoundRecord rec;
    rec.variant = o.name;
    rec.round = round;
    // Poisson sampling with rate q: what the accountant charges.
    std::bernoulli_distribution join(o.sample_rate);
    std::vector<int> cohort;
    for (int c = 0; c < o.clients; ++c) {
      if (join(gen)) cohort.push_back(c);
    }
    if (cohort.empty()) cohort.push_back(static_cast<int>(gen() % o.clients));
    rec.participants = static_cast<int>(cohort.size());

    const std::vector<float> weights(coordinator->params().begin(), coordinator->params().end());
    std::vector<std::vector<float>> packed_updates;
    const absl::Time train_start = absl::Now();
    for (int c : cohort) {
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> update, train(c, round, weights));
      if (update.size() != weights.size()) {
        return absl::InvalidArgumentError(absl::StrCat("client ", c, " returned an update of ",
                                                       update.size(), " values, the model has ",
                                                       weights.size()));
      }
      for (float v : update) {
        if (!std::isfinite(v)) {
          return absl::InvalidArgumentError(
              absl::StrCat("client ", c, " returned a non-finite update in round ", round));
        }
      }
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> packed, coordinator->PackUpdate(update));
      if (o.private_aggregation) {
        TANDEM_ASSIGN_OR_RETURN(packed, memories.Compensate(c, std::move(packed), *plan->sum));
      }
      packed_updates.push_back(std::move(packed));
      rec.bytes_down += weights.size() * sizeof(float);
    }
    rec.train_seconds = absl::ToDoubleSeconds(absl::Now() - train_start);

    TANDEM_ASSIGN_OR_RETURN(
        std::vector<float> mean,
        RoundMean(o, *plan->sum, AggregationRoundOf(o, plan->round_id, run_start_ms),
                  packed_updates, aggregators, &rec));
    TANDEM_RETURN_IF_ERROR(coordinator->FinishRound(mean));
    if (evaluate) {
      TANDEM_ASSIGN_OR_RETURN(Evaluation eval, evaluate(round, coordinator->params()));
      rec.test_accuracy = eval.accuracy;
      rec.test_loss = eval.loss;
    }
    rec.epsilon = plan->epsilon_after;
    rec.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    result.records.push_back(rec);
    if (progress) progress(rec);
  }
  result.final_params.assign(coordinator->params().begin(), coordinator->params().end());
  return result;
}

}  // namespace tandem::sim
