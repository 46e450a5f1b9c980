#include "ml/worker/model_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/worker/resource_name.h"

namespace tandem::ml::worker {

// One held model. The immutable description is outside the lock so that
// List never waits for a training step.
struct ModelLease::Entry {
  Entry(LoadedModel m, std::vector<TensorLayout> layout, uint64_t v, int64_t weight_bytes)
      : name(m.name),
        kind(m.kind),
        config(m.config),
        tensors(std::move(layout)),
        model(std::move(m)),
        version(v),
        weight_bytes(weight_bytes) {}

  const std::string name, kind;
  const ModelConfig config;
  const std::vector<TensorLayout> tensors;
  absl::Mutex mu;  // kernels share it; a training step holds it alone
  LoadedModel model ABSL_GUARDED_BY(mu);
  std::atomic<uint64_t> version;
  const int64_t weight_bytes;
  std::atomic<int64_t> optimizer_bytes{0};
  std::atomic<int64_t> train_steps{0};
  bool live = true;  // guarded by the store's mu_

  int64_t bytes() const { return weight_bytes + optimizer_bytes.load(); }
};

namespace {

absl::Status CheckName(const std::string& name) { return CheckResourceName("model", name); }

absl::Status NotLoaded(const std::string& name) {
  return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
}

}  // namespace

ModelLease::ModelLease(ModelStore* store, std::shared_ptr<Entry> entry, bool exclusive)
    : store_(store), entry_(std::move(entry)), exclusive_(exclusive) {}

ModelLease::~ModelLease() {
  if (exclusive_) {
    entry_->mu.Unlock();
  } else {
    entry_->mu.ReaderUnlock();
  }
}

const LoadedModel& ModelLease::model() const { return entry_->model; }

LoadedModel* ModelLease::mutable_model() { return exclusive_ ? &entry_->model : nullptr; }

uint64_t ModelLease::version() const { return entry_->version.load(); }

absl::Status ModelLease::SetOptimizerBytes(int64_t bytes) {
  if (!exclusive_) return absl::FailedPreconditionError("optimizer state needs an exclusive lease");
  return store_->Charge(entry_.get(), bytes - entry_->optimizer_bytes.load());
}

void ModelLease::FinishStep() {
  if (!exclusive_) return;
  entry_->version.fetch_add(1);
  entry_->train_steps.fetch_add(1);
}

absl::Status ModelStore::FitsLocked(int64_t bytes, int64_t freed) const {
  if (used_ - freed + bytes > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory: the model needs ", bytes,
                                                     " bytes, ", used_ - freed, " of the worker's ",
                                                     max_bytes_, " model bytes are in use"));
  }
  return absl::OkStatus();
}

absl::Status ModelStore::CheckFits(int64_t bytes, const std::string& replacing) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(replacing);
  return FitsLocked(bytes, it == models_.end() ? 0 : it->second->bytes());
}

absl::StatusOr<ModelSummary> ModelStore::Load(const std::string& name, uint64_t version,
                                              const std::string& kind, const ModelConfig& config,
                                              TensorSet tensors, bool replace) {
  TANDEM_RETURN_IF_ERROR(CheckName(name));
  {
    // Refuse early (before copying and validating) what cannot fit anyway.
    int64_t bytes = 0;
    for (const NamedTensor& t : tensors) bytes += t.value.size() * int64_t{sizeof(float)};
    TANDEM_RETURN_IF_ERROR(CheckFits(bytes, replace ? name : ""));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<TensorLayout> layout,
                          ModelLayout(kind, config, max_elements()));
  TANDEM_ASSIGN_OR_RETURN(ModelWeights weights,
                          BuildModelWeights(kind, config, std::move(tensors), max_elements()));
  if (kind == "tensors") {
    ForEachModelTensor(weights, [&](const std::string& n, const kernels::Tensor& t) {
      layout.push_back({n, t.shape()});
    });
  }
  const int64_t bytes = ModelWeightBytes(weights);
  LoadedModel model{name, kind, config, std::move(weights), {}};
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  int64_t freed = 0;
  if (it != models_.end()) {
    if (!replace) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' is already loaded (version ", it->second->version.load(),
                       "); set replace to load it again"));
    }
    freed = it->second->bytes();
    if (version == 0) version = it->second->version.load() + 1;
  }
  if (version == 0) version = 1;
  TANDEM_RETURN_IF_ERROR(FitsLocked(bytes, freed));
  auto entry = std::make_shared<Entry>(std::move(model), std::move(layout), version, bytes);
  if (it != models_.end()) {
    it->second->live = false;
    it->second = entry;
  } else {
    models_.emplace(name, entry);
  }
  used_ += bytes - freed;
  return Summarize(*entry);
}

absl::StatusOr<std::shared_ptr<ModelStore::Entry>> ModelStore::Find(const std::string& name,
                                                                    uint64_t version) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotLoaded(name);
  const uint64_t held = it->second->version.load();
  if (version != 0 && version != held) {
    return absl::FailedPreconditionError(absl::StrCat("model '", name, "' is at version ", held,
                                                      ", the request asked for version ", version));
  }
  return it->second;
}

absl::StatusOr<std::unique_ptr<ModelLease>> ModelStore::Acquire(const std::string& name,
                                                                uint64_t version, bool exclusive) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Find(name, version));
  if (exclusive) {
    e->mu.Lock();
  } else {
    e->mu.ReaderLock();
  }
  std::unique_ptr<ModelLease> lease(new ModelLease(this, e, exclusive));
  // A step may have finished, or the model gone, while we waited.
  const uint64_t held = e->version.load();
  if (version != 0 && version != held) {
    return absl::FailedPreconditionError(absl::StrCat("model '", name, "' is at version ", held,
                                                      ", the request asked for version ", version));
  }
  {
    absl::MutexLock lock(&mu_);
    if (!e->live) return NotLoaded(name);
  }
  return lease;
}

absl::StatusOr<int64_t> ModelStore::Unload(const std::string& name, uint64_t version) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Find(name, version));
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second != e) return NotLoaded(name);
  e->live = false;
  models_.erase(it);
  const int64_t bytes = e->bytes();
  used_ -= bytes;
  return bytes;
}

ModelSummary ModelStore::Summarize(const Entry& e) const {
  ModelSummary s;
  s.name = e.name;
  s.version = e.version.load();
  s.kind = e.kind;
  s.config = e.config;
  s.tensors = e.tensors;
  s.bytes = e.bytes();
  s.optimizer_bytes = e.optimizer_bytes.load();
  s.train_steps = e.train_steps.load();
  return s;
}

std::vector<ModelSummary> ModelStore::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelSummary> out;
  for (const auto& [name, e] : models_) out.push_back(Summarize(*e));
  return out;
}

absl::StatusOr<ModelSnapshot> ModelStore::Read(const std::string& name, uint64_t version) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ModelLease> lease, Acquire(name, version, false));
  ModelSnapshot s;
  s.summary = Summarize(*lease->entry_);
  s.tensors = ModelTensors(lease->model().weights);
  return s;
}

int64_t ModelStore::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

absl::Status ModelStore::Charge(Entry* e, int64_t delta) {
  absl::MutexLock lock(&mu_);
  if (e->live) {
    if (delta > 0) TANDEM_RETURN_IF_ERROR(FitsLocked(delta, 0));
    used_ += delta;
  }
  e->optimizer_bytes.fetch_add(delta);
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
