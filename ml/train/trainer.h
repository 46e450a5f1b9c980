// Data-parallel mini-batch gradients, evaluation and epoch loops.
//
// GradientEngine splits a batch into `num_threads` contiguous shards, runs
// forward/backward of each shard on a oneTBB task_arena of that many
// threads (each shard with its own activations and gradient buffer) and sums
// the shard gradients in shard order. The result depends only on the inputs
// and the shard count, never on scheduling.
//
// Lifecycle: one engine per training loop. Thread-compatible: one call at a
// time (the engine owns the per-shard buffers).
#ifndef TANDEM_ML_TRAIN_TRAINER_H_
#define TANDEM_ML_TRAIN_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/clock.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "ml/optim/optimizer.h"

namespace tandem::ml {

struct BatchStats {
  double loss_sum = 0.0;  // sum of per-sample losses
  int64_t correct = 0;
  int64_t count = 0;
};

struct EvalStats {
  double loss = 0.0;      // mean
  double accuracy = 0.0;  // fraction correct
};

struct EmbeddingsAndLosses {
  Matrix embeddings;          // penultimate activations, one row per sample
  std::vector<float> losses;  // per-sample cross-entropy
};

class GradientEngine {
 public:
  // Returns INVALID_ARGUMENT when num_threads < 1.
  static absl::StatusOr<std::unique_ptr<GradientEngine>> Create(int num_threads);
  ~GradientEngine();

  int num_threads() const { return num_threads_; }

  // Mean cross-entropy gradient over rows `rows` of `data` into `grad`
  // (resized to num_params, overwritten). Returns INVALID_ARGUMENT for an
  // empty batch, a row out of range, or a data/model mismatch.
  absl::StatusOr<BatchStats> ComputeGradient(const Model& model, const Dataset& data,
                                             absl::Span<const int64_t> rows,
                                             std::vector<float>* grad);

  // One optimizer step on `model`'s parameters with `grad`, the element-wise
  // update split over the engine's threads (same result as
  // optimizer.Step(model.mutable_params(), grad); errors are the optimizer's).
  absl::Status ApplyStep(Optimizer& optimizer, Model& model, absl::Span<const float> grad);

  // Loss and accuracy over all of `data` in chunks of `chunk` rows.
  absl::StatusOr<EvalStats> Evaluate(const Model& model, const Dataset& data, int64_t chunk = 512);

  // Penultimate embeddings and per-sample losses of every row of `data`.
  absl::StatusOr<EmbeddingsAndLosses> EmbedAndLoss(const Model& model, const Dataset& data,
                                                   int64_t chunk = 512);

 private:
  struct Impl;
  // Element ranges below this run on the calling thread.
  static constexpr size_t kMinRange = 16384;
  GradientEngine(int num_threads, std::unique_ptr<Impl> impl);
  // body(begin, end) over [0, n), split across the arena's threads.
  void RunRanges(size_t n, absl::FunctionRef<void(size_t, size_t)> body);
  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

struct EpochOptions {
  int64_t batch_size = 64;
};

struct EpochStats {
  double loss = 0.0;      // mean training loss seen during the epoch
  double accuracy = 0.0;  // training accuracy seen during the epoch
  double seconds = 0.0;
  double samples_per_second = 0.0;
};

// One pass over `indices` (shuffled with `gen`) in mini-batches: gradient,
// then optimizer step. `clock` (not owned, may be RealClock::Default())
// times the epoch. Returns INVALID_ARGUMENT for batch_size < 1 or empty
// indices and propagates engine/optimizer errors.
absl::StatusOr<EpochStats> TrainEpoch(Model& model, Optimizer& optimizer, GradientEngine& engine,
                                      const Dataset& data, std::vector<int64_t> indices,
                                      const EpochOptions& options, absl::BitGenRef gen,
                                      const Clock& clock);

// Runs `steps` local SGD-style steps (batches drawn by cycling through a
// shuffled `data`), as a federated client does between rounds.
absl::Status TrainSteps(Model& model, Optimizer& optimizer, GradientEngine& engine,
                        const Dataset& data, int64_t steps, int64_t batch_size,
                        absl::BitGenRef gen);

}  // namespace tandem::ml

#endif  // TANDEM_ML_TRAIN_TRAINER_H_
