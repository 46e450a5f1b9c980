// The models tandem-worker holds as resources: named, versioned weights
// (ml/worker/model_kinds.h) kept in the worker's memory, where the kernels
// read them, and updated in place by training kernels.
//
//   Load(name, kind, config, tensors)   validate -> budget -> publish
//   Acquire(name, version, exclusive)   a ModelLease: shared for kernels
//                                       that read, exclusive for a step
//   Unload / List / Read                 free, describe, copy out
//
// Errors: NOT_FOUND "model 'x' is not loaded"; FAILED_PRECONDITION when the
// version asked (not 0) is not the one held, or when a loaded name is loaded
// again without replace; INVALID_ARGUMENT for a bad name, kind, config,
// tensor name or shape, or a non-finite value; RESOURCE_EXHAUSTED "out of
// memory" when the bytes held (weights plus optimizer state, all models)
// would exceed max_bytes.
//
// Versions: a load publishes version `version` (0: 1 for a new name, held + 1
// when replacing); every training step bumps it by one.
//
// Thread safety: all methods may be called concurrently. Each model has its
// own reader/writer lock: any number of reading kernels share it, a training
// step holds it alone. The store's own lock is never held while waiting for
// a model's lock. A model unloaded or replaced while leased stays alive (and
// its memory held) until the last lease ends; a step on a replaced model
// updates the old weights, which nobody can address any more.
#ifndef TANDEM_ML_WORKER_MODEL_STORE_H_
#define TANDEM_ML_WORKER_MODEL_STORE_H_

#include <any>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ml/worker/model_kinds.h"

namespace tandem::ml::worker {

// What a kernel sees of a model.
struct LoadedModel {
  std::string name;
  std::string kind;
  ModelConfig config;
  ModelWeights weights;
  // Kernel-specific training state (e.g. a SpotlightTrainer with its AdamW
  // moments); empty until a training kernel creates it. Its size is
  // accounted through ModelLease::SetOptimizerBytes.
  std::any optimizer;
};

// Description of a held model (no tensor data).
struct ModelSummary {
  std::string name;
  uint64_t version = 0;
  std::string kind;
  ModelConfig config;
  std::vector<TensorLayout> tensors;
  int64_t bytes = 0;  // weights + optimizer state
  int64_t optimizer_bytes = 0;
  int64_t train_steps = 0;
};

struct ModelSnapshot {
  ModelSummary summary;
  TensorSet tensors;  // copies, in wire order
};

class ModelStore;

// One kernel call's hold on one model; releases the lock on destruction.
// Not thread-safe (one call owns it).
class ModelLease {
 public:
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  ~ModelLease();

  const LoadedModel& model() const;
  // nullptr unless the lease is exclusive.
  LoadedModel* mutable_model();
  bool exclusive() const { return exclusive_; }
  uint64_t version() const;

  // Exclusive leases: accounts `bytes` of optimizer state for the model
  // (replacing the previous amount). RESOURCE_EXHAUSTED "out of memory",
  // nothing changed, when the growth does not fit the budget.
  absl::Status SetOptimizerBytes(int64_t bytes);
  // Exclusive leases: a training step changed the weights: version + 1.
  void FinishStep();

 private:
  friend class ModelStore;
  struct Entry;
  ModelLease(ModelStore* store, std::shared_ptr<Entry> entry, bool exclusive);

  ModelStore* store_;
  std::shared_ptr<Entry> entry_;
  bool exclusive_;
};

class ModelStore {
 public:
  // max_bytes >= 0: budget of all models together.
  explicit ModelStore(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Validates (model_kinds.h), then publishes. Returns the new summary.
  absl::StatusOr<ModelSummary> Load(const std::string& name, uint64_t version,
                                    const std::string& kind, const ModelConfig& config,
                                    TensorSet tensors, bool replace);
  // RESOURCE_EXHAUSTED "out of memory" unless `bytes` more fit next to what
  // is held now, ignoring the model `replacing` (a name, may be empty). For
  // refusing a load early, before its data has arrived.
  absl::Status CheckFits(int64_t bytes, const std::string& replacing) const;

  // version 0 = the one held now. Waits for the model's lock.
  absl::StatusOr<std::unique_ptr<ModelLease>> Acquire(const std::string& name, uint64_t version,
                                                      bool exclusive);
  // Frees the model (version 0 = whichever is held). Returns its bytes.
  absl::StatusOr<int64_t> Unload(const std::string& name, uint64_t version);
  // Sorted by name.
  std::vector<ModelSummary> List() const;
  // The current tensors of the model (waits for a running step to finish).
  absl::StatusOr<ModelSnapshot> Read(const std::string& name, uint64_t version);

  int64_t used_bytes() const;
  int64_t max_bytes() const { return max_bytes_; }
  // Largest float count one model may have (max_bytes / 4).
  int64_t max_elements() const { return max_bytes_ / static_cast<int64_t>(sizeof(float)); }

 private:
  friend class ModelLease;
  using Entry = ModelLease::Entry;

  absl::StatusOr<std::shared_ptr<Entry>> Find(const std::string& name, uint64_t version) const;
  ModelSummary Summarize(const Entry& e) const;
  absl::Status Charge(Entry* e, int64_t delta);
  absl::Status FitsLocked(int64_t bytes, int64_t freed) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> models_ ABSL_GUARDED_BY(mu_);
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_MODEL_STORE_H_
