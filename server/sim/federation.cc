#include "server/sim/federation.h"

#include <cmath>
#include <optional>
#include <random>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "base/seed_mix.h"
#include "base/status_macros.h"
#include "ml/coido/coido.h"
#include "ml/data/partition.h"
#include "ml/data/scalable_partition.h"
#include "ml/fedluar/federated_sim.h"
#include "ml/model/model_zoo.h"
#include "ml/optim/optimizer.h"
#include "ml/train/trainer.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_arena.h"
#include "server/core/federated_task.h"
#include "server/core/secure_sum.h"
#include "server/core/task_targets.h"
#include "server/sim/client_memory.h"
#include "server/sim/private_mean.h"
#include "server/sim/sim_models.h"

namespace tandem::sim {

absl::StatusOr<uint32_t> LogBlocksPerGroup(const FederationOptions& o, uint64_t model_dimension) {
  const double f = o.blocks_fraction;
  if (!(f >= 0 && f <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("blocks_fraction must be in (0, 1], got ", f));
  }
  if (f == 0) return o.log_blocks_per_group;
  if (o.block_size == 0 || model_dimension == 0) {
    return absl::InvalidArgumentError("block_size and the model dimension must be > 0");
  }
  const uint64_t blocks = (model_dimension + o.block_size - 1) / o.block_size;
  const double target =
      std::max<double>(1.0, std::llround(f * static_cast<double>(blocks)));
  std::optional<uint32_t> best;
  double best_gap = 0;
  for (uint32_t d = 0; d <= 24; ++d) {
    const uint64_t per_group = uint64_t{1} << d;
    const uint64_t k = (blocks + per_group - 1) / per_group;
    if (k <= server::kMaxGroups) {
      const double gap = std::abs(std::log(static_cast<double>(k) / target));
      if (!best.has_value() || gap < best_gap - 1e-12) {
        best = d;
        best_gap = gap;
      }
    }
    if (k == 1) break;  // larger d only pads the one group
  }
  if (!best.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model of ", model_dimension, " parameters needs more than 4096 groups of blocks of ",
        o.block_size, ": raise block_size"));
  }
  return *best;
}

uint64_t AggregationRoundOf(const FederationOptions& o, uint64_t round, int64_t run_start_unix_ms) {
  if (o.task_id.empty()) return round;
  return static_cast<uint64_t>(run_start_unix_ms) * 1000 + round;
}

absl::Status ApplySimTargets(double max_upload_vs_dense, double target_epsilon,
                             uint64_t model_dimension, FederationOptions* options) {
  TANDEM_ASSIGN_OR_RETURN(server::FederatedTaskOptions task,
                          SimTaskOptions(*options, model_dimension));
  const server::TaskTargets targets{.max_upload_vs_dense = max_upload_vs_dense,
                                    .target_epsilon = target_epsilon,
                                    .rounds = static_cast<uint64_t>(std::max(0, options->rounds))};
  TANDEM_RETURN_IF_ERROR(server::ApplyTaskTargets(targets, model_dimension, &task));
  options->log_blocks_per_group = task.secure_sum.log_blocks_per_group;
  options->blocks_fraction = 0;
  options->noise_multiplier = task.secure_sum.noise_multiplier;
  options->epsilon_budget = task.epsilon_budget;
  return absl::OkStatus();
}

absl::StatusOr<server::FederatedTaskOptions> SimTaskOptions(const FederationOptions& o,
                                                            uint64_t model_dimension) {
  uint64_t nonce = 0;
  TANDEM_RETURN_IF_ERROR(OpenSslRandom::Default()->Fill(
      absl::MakeSpan(reinterpret_cast<uint8_t*>(&nonce), sizeof(nonce))));
  server::FederatedTaskOptions to;
  to.secure_sum.task_id =
      o.task_id.empty() ? absl::StrCat("sim-", o.name, "-", nonce % 1000000007) : o.task_id;
  to.secure_sum.block_size = o.block_size;
  to.secure_sum.log_blocks_per_group = o.log_blocks_per_group;
  to.secure_sum.value_bits = o.value_bits;
  if (o.private_aggregation) {
    TANDEM_ASSIGN_OR_RETURN(to.secure_sum.log_blocks_per_group,
                            LogBlocksPerGroup(o, model_dimension));
    to.secure_sum.block_selection = o.block_selection;
    to.secure_sum.encoding = o.encoding;
  }
  to.secure_sum.clip_l2_norm = o.clip_l2_norm;
  to.secure_sum.noise_multiplier = o.private_aggregation ? o.noise_multiplier : 0.0;
  to.secure_sum.max_reports = static_cast<uint32_t>(std::max(1, o.clients));
  to.secure_sum.norm_proofs = o.private_aggregation && o.norm_proofs;
  to.secure_sum.min_batch_size = o.min_batch_size;
  to.server_lr = o.server_lr;
  to.num_recycled = o.fedluar ? o.num_recycled : 0;
  to.seed = o.seed;
  to.sample_rate = o.sample_rate;
  to.delta = o.delta;
  to.epsilon_budget = o.private_aggregation ? o.epsilon_budget : 0.0;
  return to;
}

absl::StatusOr<ml::Partition> SplitClients(const FederationOptions& o, const ml::Dataset& train) {
  const int64_t n = static_cast<int64_t>(train.labels.size());
  // At least 10 samples per client where the data allows it.
  const int64_t min_per_client = std::max<int64_t>(1, std::min<int64_t>(10, n / std::max(1, o.clients)));
  const ml::ClientSizes sizes{.min_per_client = min_per_client, .size_sigma = o.size_sigma,
                              .fill = 1.0};
  if (o.partition == "mixture") {
    return ml::PartitionDirichletMixture(train.labels, train.num_classes, o.clients,
                                         o.dirichlet_alpha, sizes, o.seed);
  }
  if (o.partition == "dirichlet") {
    return ml::PartitionDirichlet(train.labels, train.num_classes, o.clients, o.dirichlet_alpha,
                                  o.seed, min_per_client);
  }
  if (o.partition == "iid") return ml::PartitionIid(n, o.clients, o.seed);
  if (o.partition == "quantity") return ml::PartitionQuantitySkew(n, o.clients, sizes, o.seed);
  return absl::InvalidArgumentError(absl::StrCat(
      "partition must be mixture, dirichlet, iid or quantity; got '", o.partition, "'"));
}

absl::StatusOr<ClientShards> ClientShards::Create(const ml::Partition& partition,
                                                  int64_t samples) {
  if (partition.empty()) return absl::InvalidArgumentError("client shards: no clients");
  ClientShards s;
  size_t total = 0;
  for (const auto& c : partition) total += c.size();
  s.rows_.reserve(total);
  s.offsets_.reserve(partition.size() + 1);
  s.offsets_.push_back(0);
  std::vector<bool> used(static_cast<size_t>(std::max<int64_t>(samples, 0)));
  for (size_t c = 0; c < partition.size(); ++c) {
    if (partition[c].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("client shards: client ", c, " is empty"));
    }
    for (int64_t i : partition[c]) {
      if (i < 0 || i >= samples || used[static_cast<size_t>(i)]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client shards: sample ", i, " of client ", c, " is out of range or used twice"));
      }
      used[static_cast<size_t>(i)] = true;
      s.rows_.push_back(i);
    }
    s.offsets_.push_back(static_cast<int64_t>(s.rows_.size()));
  }
  return s;
}

absl::StatusOr<ClientShards> ShardClients(const FederationOptions& o, const ml::Dataset& train) {
  TANDEM_ASSIGN_OR_RETURN(ml::Partition partition, SplitClients(o, train));
  return ClientShards::Create(partition, train.size());
}

namespace {

// One client's local round: its full update (trained minus global weights)
// and the rows it trained on (CoIDO may select fewer than it holds).
struct LocalResult {
  std::vector<float> update;
  int64_t rows = 0;
};

// Client c's local training in `round` from the global model (`weights` its
// flat parameters). Its own model copy, engine and generator (seeded by
// (seed, round, c) alone): safe to run beside other clients, and the same
// result on any thread. Holds the client's rows only while it trains (a
// device holds its data). INVALID_ARGUMENT when training diverges.
absl::StatusOr<LocalResult> TrainClient(const FederationOptions& o, const ml::Model& global,
                                        const std::vector<float>& weights, const ml::Dataset& train,
                                        const ClientShards& shards, int c, int round) {
  std::mt19937_64 gen(
      StreamSeed(o.seed * 7919 + 1, static_cast<uint64_t>(round), static_cast<uint64_t>(c)));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::GradientEngine> engine,
                          ml::GradientEngine::Create(o.threads));
  std::unique_ptr<ml::Model> local = global.Clone();
  ml::SgdOptions so;
  so.learning_rate = o.client_lr;
  so.momentum = 0.9;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Optimizer> opt, ml::CreateSgd(so));
  TANDEM_ASSIGN_OR_RETURN(const ml::Dataset own, train.Subset(shards.rows(c)));
  const ml::Dataset* data = &own;
  ml::Dataset selected;
  if (o.coido) {
    TANDEM_ASSIGN_OR_RETURN(ml::EmbeddingsAndLosses el, engine->EmbedAndLoss(global, *data));
    ml::CoidoOptions co;
    co.select_fraction = o.coido_fraction;
    co.num_clusters = static_cast<int>(std::min<int64_t>(10, data->size() / 2));
    co.seed = o.seed + static_cast<uint64_t>(round) * 1000 + c;
    TANDEM_ASSIGN_OR_RETURN(
        ml::CoidoResult pick,
        ml::CoidoSelect(el.embeddings, el.losses, data->labels, data->num_classes, co));
    TANDEM_ASSIGN_OR_RETURN(selected, data->Subset(pick.selected));
    data = &selected;
  }
  TANDEM_RETURN_IF_ERROR(
      ml::TrainSteps(*local, *opt, *engine, *data, o.local_steps, o.batch_size, gen));
  LocalResult out;
  out.rows = data->size();
  out.update = local->Flatten();
  for (size_t i = 0; i < out.update.size(); ++i) {
    out.update[i] -= weights[i];
    if (!std::isfinite(out.update[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("client ", c, "'s local training diverged in round ", round,
                       " (non-finite parameter ", i, "): lower client_lr"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<RoundRecord>> RunFederation(
    const FederationOptions& o, const ml::Dataset& train, const ml::Dataset& test,
    const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress) {
  if (o.rounds < 1 || o.clients < 1 || o.sample_rate <= 0 || o.sample_rate > 1) {
    return absl::InvalidArgumentError("rounds, clients >= 1 and sample_rate in (0, 1] required");
  }
  // The clients' data: index ranges into `train`, no copies.
  TANDEM_ASSIGN_OR_RETURN(const ClientShards shards, ShardClients(o, train));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> global,
                          MakeSimModel(o.model, train.features.cols(), o.hidden,
                                       train.num_classes));
  global->InitFromSeed(o.seed);
  const double flops_per_sample = ml::ForwardFlopsPerSample(*global);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::GradientEngine> engine,
                          ml::GradientEngine::Create(o.threads));
  // The coordinator's side: model, FedLUAR, server optimizer, accountant.
  TANDEM_ASSIGN_OR_RETURN(
      const server::FederatedTaskOptions to,
      SimTaskOptions(o, static_cast<uint64_t>(global->num_params())));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<server::FederatedTask> coordinator,
                          server::FederatedTask::Create(to, ml::TensorSlices(*global),
                                                        global->Flatten()));
  // The clients' error-feedback residuals (TOP_NORM rounds only).
  ClientMemories memories;

  std::mt19937_64 gen(o.seed * 7919 + 1);
  std::vector<RoundRecord> records;
  const int64_t run_start_ms = absl::ToUnixMillis(absl::Now());
  for (int round = 1; round <= o.rounds; ++round) {
    const absl::Time start = absl::Now();
    absl::StatusOr<server::RoundPlan> plan = coordinator->PlanRound();
    if (absl::IsResourceExhausted(plan.status())) break;  // privacy budget spent
    if (!plan.ok()) return plan.status();
    TANDEM_RETURN_IF_ERROR(global->SetParams(coordinator->params()));
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

    // The aggregators open the round while the cohort trains (a
    // coordinator opens it when the round starts; devices train after
    // check-in); RoundMean waits for it.
    const uint64_t aggregation_round = AggregationRoundOf(o, plan->round_id, run_start_ms);
    absl::Status opened = absl::OkStatus();
    std::thread opener;
    absl::Cleanup join_opener = [&opener] {
      if (opener.joinable()) opener.join();
    };
    if (o.private_aggregation) {
      opener = std::thread([&opened, &plan, &aggregators, aggregation_round] {
        opened = OpenPrivateRound(*plan->sum, aggregation_round, aggregators);
      });
    }

    const std::vector<float> weights = global->Flatten();
    std::vector<std::vector<float>> packed_updates;
    const absl::Time train_start = absl::Now();
    // The cohort trains concurrently (each client on its own model copy,
    // engine and generator); packing and error feedback follow in order.
    std::vector<absl::StatusOr<LocalResult>> results(cohort.size(),
                                                     absl::InternalError("client not trained"));
    tbb::task_arena arena(o.client_threads > 0 ? o.client_threads
                                               : tbb::this_task_arena::max_concurrency());
    arena.execute([&] {
      tbb::parallel_for(size_t{0}, cohort.size(), [&](size_t i) {
        results[i] = TrainClient(o, *global, weights, train, shards, cohort[i], round);
      });
    });
    for (size_t i = 0; i < cohort.size(); ++i) {
      const int c = cohort[i];
      TANDEM_RETURN_IF_ERROR(results[i].status());
      rec.train_flops += 3.0 * flops_per_sample * static_cast<double>(o.local_steps) *
                         static_cast<double>(std::min<int64_t>(o.batch_size, results[i]->rows));
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> packed,
                              coordinator->PackUpdate(results[i]->update));
      if (o.private_aggregation) {
        // What the client's report is built from: its update plus the
        // residual it kept from its last TOP_NORM report (RANDOM: as is).
        TANDEM_ASSIGN_OR_RETURN(packed, memories.Compensate(c, std::move(packed), *plan->sum));
      }
      packed_updates.push_back(std::move(packed));
      rec.bytes_down += weights.size() * sizeof(float);
    }
    rec.train_seconds = absl::ToDoubleSeconds(absl::Now() - train_start);
    if (opener.joinable()) {
      const absl::Time wait_start = absl::Now();  // what the open adds after training
      opener.join();
      rec.aggregate_seconds += absl::ToDoubleSeconds(absl::Now() - wait_start);
      TANDEM_RETURN_IF_ERROR(opened);
    }

    TANDEM_ASSIGN_OR_RETURN(std::vector<float> mean,
                            RoundMean(o, *plan->sum, aggregation_round, packed_updates, aggregators,
                                      &rec, /*round_open=*/o.private_aggregation));
    TANDEM_RETURN_IF_ERROR(coordinator->FinishRound(mean));
    TANDEM_RETURN_IF_ERROR(global->SetParams(coordinator->params()));

    TANDEM_ASSIGN_OR_RETURN(ml::EvalStats eval, engine->Evaluate(*global, test));
    rec.test_accuracy = eval.accuracy;
    rec.test_loss = eval.loss;
    rec.epsilon = plan->epsilon_after;
    rec.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    records.push_back(rec);
    if (progress) progress(rec);
  }
  return records;
}

}  // namespace tandem::sim
