#include "ml/train/trainer.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/model/loss.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace tandem::ml {

struct GradientEngine::Impl {
  explicit Impl(int threads) : arena(threads) {}
  struct Shard {
    Matrix x;
    std::vector<int> labels;
    Activations acts;
    Matrix grad_logits;
    std::vector<float> grad;
    BatchStats stats;
    absl::Status status;
  };
  tbb::task_arena arena;
  std::vector<Shard> shards;
};

GradientEngine::GradientEngine(int num_threads, std::unique_ptr<Impl> impl)
    : num_threads_(num_threads), impl_(std::move(impl)) {
  impl_->shards.resize(static_cast<size_t>(num_threads));
}
GradientEngine::~GradientEngine() = default;

absl::StatusOr<std::unique_ptr<GradientEngine>> GradientEngine::Create(int num_threads) {
  if (num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient engine: num_threads ", num_threads, " < 1"));
  }
  return std::unique_ptr<GradientEngine>(
      new GradientEngine(num_threads, std::make_unique<Impl>(num_threads)));
}

absl::StatusOr<BatchStats> GradientEngine::ComputeGradient(const Model& model, const Dataset& data,
                                                           absl::Span<const int64_t> rows,
                                                           std::vector<float>* grad) {
  if (rows.empty()) return absl::InvalidArgumentError("gradient: empty batch");
  if (data.features.cols() != model.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient: data has ", data.features.cols(),
                                                   " features, model expects ",
                                                   model.input_size()));
  }
  for (int64_t r : rows) {
    if (r < 0 || r >= data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("gradient: row ", r, " out of range"));
    }
  }
  const size_t n = rows.size();
  const size_t shards = std::min<size_t>(static_cast<size_t>(num_threads_), n);
  const float scale = 1.0f / static_cast<float>(n);
  const size_t num_params = static_cast<size_t>(model.num_params());
  auto run_shard = [&](size_t s) {
    Impl::Shard& sh = impl_->shards[s];
    const size_t begin = n * s / shards, end = n * (s + 1) / shards;
    sh.x.resize(static_cast<Eigen::Index>(end - begin), data.features.cols());
    sh.labels.resize(end - begin);
    for (size_t i = begin; i < end; ++i) {
      sh.x.row(static_cast<Eigen::Index>(i - begin)) = data.features.row(rows[i]);
      sh.labels[i - begin] = data.labels[rows[i]];
    }
    sh.grad.assign(num_params, 0.0f);
    sh.status = model.Forward(sh.x, &sh.acts);
    if (!sh.status.ok()) return;
    absl::StatusOr<LossResult> loss =
        SoftmaxCrossEntropy(sh.acts.logits(), sh.labels, &sh.grad_logits, scale);
    if (!loss.ok()) {
      sh.status = loss.status();
      return;
    }
    sh.stats = {loss->mean_loss * static_cast<double>(end - begin), loss->correct,
                static_cast<int64_t>(end - begin)};
    sh.status = model.Backward(sh.acts, sh.grad_logits, absl::MakeSpan(sh.grad));
  };
  if (shards == 1) {
    run_shard(0);
  } else {
    impl_->arena.execute(
        [&] { tbb::parallel_for(size_t{0}, shards, [&](size_t s) { run_shard(s); }); });
  }
  BatchStats total;
  for (size_t s = 0; s < shards; ++s) TANDEM_RETURN_IF_ERROR(impl_->shards[s].status);
  grad->resize(num_params);
  // Shard sums in shard order (deterministic), element blocks in parallel.
  auto reduce = [&](size_t begin, size_t end) {
    float* out = grad->data();
    std::copy(impl_->shards[0].grad.begin() + begin, impl_->shards[0].grad.begin() + end,
              out + begin);
    for (size_t s = 1; s < shards; ++s) {
      const float* g = impl_->shards[s].grad.data();
      for (size_t i = begin; i < end; ++i) out[i] += g[i];
    }
  };
  RunRanges(num_params, reduce);
  for (size_t s = 0; s < shards; ++s) {
    const Impl::Shard& sh = impl_->shards[s];
    total.loss_sum += sh.stats.loss_sum;
    total.correct += sh.stats.correct;
    total.count += sh.stats.count;
  }
  return total;
}

void GradientEngine::RunRanges(size_t n, absl::FunctionRef<void(size_t, size_t)> body) {
  if (num_threads_ == 1 || n < 2 * kMinRange) {
    body(0, n);
    return;
  }
  // One contiguous range per thread (the update is memory-bound).
  const size_t parts = std::min<size_t>(static_cast<size_t>(num_threads_), n / kMinRange);
  impl_->arena.execute([&] {
    tbb::parallel_for(size_t{0}, parts,
                      [&](size_t k) { body(n * k / parts, n * (k + 1) / parts); });
  });
}

absl::Status GradientEngine::ApplyStep(Optimizer& optimizer, Model& model,
                                       absl::Span<const float> grad) {
  return optimizer.Step(model.mutable_params(), grad,
                        [this](size_t n, RangeBody body) { RunRanges(n, body); });
}

absl::StatusOr<EmbeddingsAndLosses> GradientEngine::EmbedAndLoss(const Model& model,
                                                                 const Dataset& data,
                                                                 int64_t chunk) {
  if (data.features.cols() != model.input_size() || chunk < 1) {
    return absl::InvalidArgumentError("embed: data does not match the model (or chunk < 1)");
  }
  const int64_t n = data.size();
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  EmbeddingsAndLosses out;
  out.losses.resize(static_cast<size_t>(n));
  std::vector<absl::Status> status(static_cast<size_t>(num_chunks));
  std::vector<Matrix> emb(static_cast<size_t>(num_chunks));
  impl_->arena.execute([&] {
    tbb::parallel_for(int64_t{0}, num_chunks, [&](int64_t c) {
      const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
      Activations acts;
      status[c] = model.Forward(data.features.middleRows(begin, end - begin), &acts);
      if (!status[c].ok()) return;
      absl::StatusOr<LossResult> loss = SoftmaxCrossEntropy(
          acts.logits(),
          absl::MakeConstSpan(data.labels)
              .subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)),
          nullptr, 1.0f, true);
      if (!loss.ok()) {
        status[c] = loss.status();
        return;
      }
      std::copy(loss->per_sample.begin(), loss->per_sample.end(), out.losses.begin() + begin);
      emb[c] = acts.embeddings();
    });
  });
  for (const auto& s : status) TANDEM_RETURN_IF_ERROR(s);
  const Eigen::Index dim = num_chunks > 0 ? emb[0].cols() : 0;
  out.embeddings.resize(n, dim);
  for (int64_t c = 0; c < num_chunks; ++c)
    out.embeddings.middleRows(c * chunk, emb[c].rows()) = emb[c];
  return out;
}

absl::StatusOr<EvalStats> GradientEngine::Evaluate(const Model& model, const Dataset& data,
                                                   int64_t chunk) {
  if (data.size() == 0) return absl::InvalidArgumentError("evaluate: empty data set");
  if (data.features.cols() != model.input_size() || chunk < 1) {
    return absl::InvalidArgumentError("evaluate: data does not match the model (or chunk < 1)");
  }
  const int64_t n = data.size();
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  std::vector<absl::StatusOr<LossResult>> results(static_cast<size_t>(num_chunks),
                                                  absl::UnknownError("not run"));
  impl_->arena.execute([&] {
    tbb::parallel_for(int64_t{0}, num_chunks, [&](int64_t c) {
      const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
      absl::StatusOr<Matrix> logits = model.Predict(data.features.middleRows(begin, end - begin));
      if (!logits.ok()) {
        results[c] = logits.status();
        return;
      }
      results[c] = SoftmaxCrossEntropy(
          *logits,
          absl::MakeConstSpan(data.labels)
              .subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)),
          nullptr);
    });
  });
  double loss = 0;
  int64_t correct = 0;
  for (int64_t c = 0; c < num_chunks; ++c) {
    TANDEM_RETURN_IF_ERROR(results[c].status());
    const int64_t rows = std::min(n, (c + 1) * chunk) - c * chunk;
    loss += results[c]->mean_loss * static_cast<double>(rows);
    correct += results[c]->correct;
  }
  return EvalStats{loss / static_cast<double>(n),
                   static_cast<double>(correct) / static_cast<double>(n)};
}

absl::StatusOr<EpochStats> TrainEpoch(Model& model, Optimizer& optimizer, GradientEngine& engine,
                                      const Dataset& data, std::vector<int64_t> indices,
                                      const EpochOptions& options, absl::BitGenRef gen,
                                      const Clock& clock) {
  if (options.batch_size < 1 || indices.empty()) {
    return absl::InvalidArgumentError("train epoch: batch_size must be >= 1 and indices non-empty");
  }
  std::shuffle(indices.begin(), indices.end(), gen);
  const absl::Time start = clock.Now();
  std::vector<float> grad;
  BatchStats total;
  for (size_t b = 0; b < indices.size(); b += static_cast<size_t>(options.batch_size)) {
    const size_t e = std::min(indices.size(), b + static_cast<size_t>(options.batch_size));
    TANDEM_ASSIGN_OR_RETURN(
        BatchStats s,
        engine.ComputeGradient(model, data, absl::MakeConstSpan(indices).subspan(b, e - b), &grad));
    TANDEM_RETURN_IF_ERROR(engine.ApplyStep(optimizer, model, grad));
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  EpochStats out;
  out.seconds = absl::ToDoubleSeconds(clock.Now() - start);
  out.loss = total.loss_sum / static_cast<double>(total.count);
  out.accuracy = static_cast<double>(total.correct) / static_cast<double>(total.count);
  out.samples_per_second = out.seconds > 0 ? static_cast<double>(total.count) / out.seconds : 0.0;
  return out;
}

absl::Status TrainSteps(Model& model, Optimizer& optimizer, GradientEngine& engine,
                        const Dataset& data, int64_t steps, int64_t batch_size,
                        absl::BitGenRef gen) {
  if (steps < 0 || batch_size < 1 || data.size() == 0) {
    return absl::InvalidArgumentError("train steps: need steps >= 0, batch_size >= 1, data");
  }
  std::vector<int64_t> order(static_cast<size_t>(data.size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);
  std::vector<float> grad;
  std::vector<int64_t> batch;
  size_t pos = 0;
  for (int64_t s = 0; s < steps; ++s) {
    batch.clear();
    while (static_cast<int64_t>(batch.size()) < std::min<int64_t>(batch_size, data.size())) {
      if (pos == order.size()) {
        std::shuffle(order.begin(), order.end(), gen);
        pos = 0;
      }
      batch.push_back(order[pos++]);
    }
    TANDEM_ASSIGN_OR_RETURN(BatchStats unused, engine.ComputeGradient(model, data, batch, &grad));
    (void)unused;
    TANDEM_RETURN_IF_ERROR(engine.ApplyStep(optimizer, model, grad));
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml
