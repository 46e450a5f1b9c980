// Leader-follower batching of blocking calls (flat combining): callers
// Submit an item and block; whichever waiting caller finds no batch running
// becomes the leader, takes the next batch out of the queue under the lock
// (`take`), runs it without the lock (`run`, which sets each item's result),
// then marks the batch done and wakes the others. A caller whose item was
// not in that batch runs a following one itself. One batch at a time, so a
// slow batch (an fsync, a store snapshot) serves every call queued behind
// it: the aggregator's group commit of uploads and its coalesced duplicate
// checks (aggregator.cc).
//
// Item: any struct with a `bool done` member, false when submitted; the
// queue sets it (under its lock) once the item's batch has run. Items are
// owned by their callers and must outlive Submit. Thread-safe.
#ifndef TANDEM_AGGREGATOR_CORE_COMBINING_QUEUE_H_
#define TANDEM_AGGREGATOR_CORE_COMBINING_QUEUE_H_

#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace tandem::aggregator {

template <typename Item>
class CombiningQueue {
 public:
  // Moves the next batch (non-empty) out of the queue; the lock is held.
  using Take = absl::FunctionRef<std::vector<Item*>(std::vector<Item*>* queue)>;
  // Runs a batch without the lock; sets each item's result.
  using Run = absl::FunctionRef<void(const std::vector<Item*>& batch)>;

  // Every queued item, in submission order (a Take).
  static std::vector<Item*> TakeAll(std::vector<Item*>* queue) { return std::move(*queue); }

  // Returns once `mine` has run in a batch (this caller's or another's).
  void Submit(Item* mine, Take take, Run run) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(mine);
    while (!mine->done) {
      if (running_) {
        cv_.Wait(&mu_);
        continue;
      }
      running_ = true;
      std::vector<Item*> batch = take(&queue_);
      mu_.Unlock();
      run(batch);
      mu_.Lock();
      for (Item* item : batch) item->done = true;
      running_ = false;
      cv_.SignalAll();
    }
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<Item*> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_COMBINING_QUEUE_H_
