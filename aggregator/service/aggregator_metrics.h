// Prometheus series of one tandem-aggregator daemon, served on its
// metrics_listen_address (base/metrics_server.h). Everything is measured in
// this service layer or read from what the core already reports
// (Aggregator::Status); the core itself knows nothing of Prometheus.
//
// Counted as events happen (every series carries role="leader"|"helper"):
//   tandem_aggregator_uploads_total{code}   Upload calls by gRPC status
//       code: OK = stored durably (pending verification), anything else
//       refused (UNAUTHENTICATED ticket, INVALID_ARGUMENT share, ...)
//   tandem_aggregator_verification_batches_total{code}   verification
//       exchanges: on the leader the Verify calls it sent to the helper, on
//       the helper the Verify calls it answered, by status code
//   tandem_aggregator_verification_reports_total   reports in those batches
//   tandem_aggregator_verification_batch_seconds{part}   histogram per
//       batch: part="local" is this server's own work (share expansion,
//       digests and proof shares, the commit into its accumulator and store;
//       on the leader one pass's time less its peer calls, spread evenly
//       over the pass's batches; on the helper its handling of one Verify,
//       where it expands the batch's shares), part="peer" the leader's wait
//       on one Verify call to the helper
// Read from Aggregator::Status at each scrape, per known task:
//   tandem_aggregator_reports{task, state="pending|accepted|rejected"}
//       reports of the task's latest round in the durable store
//   tandem_aggregator_open_round{task} (0 = none),
//   tandem_aggregator_released_rounds{task},
//   tandem_aggregator_epsilon_spent{task}, tandem_aggregator_epsilon_budget{task}
//       this server's own privacy accounting (its policy, its noise)
//   tandem_aggregator_refused_calls_total{reason}   RefusalCounters
//   tandem_aggregator_verification_stalled_seconds   (leader) how long its
//       verification passes have been failing, 0 when they succeed; the
//       reason is in its log (base/stall_reporter.h)
// Known tasks: those with state in state_path when the daemon starts, and
// those named by authenticated callers since (the coordinator's collector
// calls, uploads with a valid ticket), at most max_tasks: an anonymous
// caller cannot grow the label set.
//
// Ownership: the daemon owns this object; it must outlive the services and
// the peer channel that report to it, and the aggregator must outlive the
// metrics server. Thread safety: every method is thread-safe.
#ifndef TANDEM_AGGREGATOR_SERVICE_AGGREGATOR_METRICS_H_
#define TANDEM_AGGREGATOR_SERVICE_AGGREGATOR_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/peer_channel.h"
#include "base/grpc_caller_gate.h"
#include "base/stall_reporter.h"

namespace tandem::aggregator {

class AggregatorMetrics {
 public:
  // Lists the tasks with state in `state_path` (task-<id>.sqlite files and
  // task-<id>.segments folders).
  AggregatorMetrics(Role role, const std::string& state_path, uint32_t max_tasks,
                    const RefusalCounters* refusals);

  void CountUpload(absl::StatusCode code);
  void CountVerifyBatch(absl::StatusCode code, int reports);
  void ObserveBatchSeconds(bool local, absl::Duration time);
  // A task named by an authenticated caller (ignored once max_tasks are known
  // or when `task_id` is not a valid task id).
  void NoteTask(const std::string& task_id);
  std::set<std::string> KnownTasks() const;

  // The event counters and histograms.
  std::shared_ptr<prometheus::Collectable> registry() const { return registry_; }
  // The per-task series, read from `aggregator` (not owned) at each scrape,
  // and the stall gauge from `stall` (not owned; null: none).
  std::shared_ptr<prometheus::Collectable> StatusCollectable(
      Aggregator* aggregator, const StallReporter* stall = nullptr) const;

 private:
  const std::string role_;
  const uint32_t max_tasks_;
  const RefusalCounters* const refusals_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* uploads_;
  prometheus::Family<prometheus::Counter>* batches_;
  prometheus::Counter* batch_reports_;
  prometheus::Histogram* local_seconds_;
  prometheus::Histogram* peer_seconds_;
  mutable absl::Mutex mu_;
  std::set<std::string> tasks_ ABSL_GUARDED_BY(mu_);
};

// The leader's PeerChannel with its calls counted and timed: each Verify is
// one verification batch. `inner` is not owned. Thread-safe.
class MeteredPeerChannel final : public PeerChannel {
 public:
  MeteredPeerChannel(PeerChannel* inner, AggregatorMetrics* metrics)
      : inner_(inner), metrics_(metrics) {}
  absl::StatusOr<proto::VerifyResponse> Verify(const proto::VerifyRequest& request) override;
  absl::StatusOr<proto::AcceptedSetAck> CommitAcceptedSet(
      const proto::AcceptedSet& request) override;

  // For the leader's verification loop (one thread): the peer time and
  // Verify calls since the last call of TakePass().
  struct Pass {
    absl::Duration peer_time;
    int batches = 0;
  };
  Pass TakePass();

 private:
  PeerChannel* const inner_;
  AggregatorMetrics* const metrics_;
  absl::Mutex mu_;
  Pass pass_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_AGGREGATOR_METRICS_H_
