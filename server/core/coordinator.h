// tandem-coordinator's core: runs the rounds of one federated task.
//
// Round life cycle (driven by Tick(), which the daemon calls from one thread):
//   idle ──PlanRound──> opening ──both aggregators open──> collecting
//   collecting ──(uploads_done >= target_reports), (enrollment over and
//                every assigned client uploaded) or deadline──>
//       >= min_reports: finalizing ──release──> idle (checkpoint, history)
//       <  min_reports: abandoned ──> idle (checkpoint; nothing released)
//   idle ──rounds done or privacy budget spent──> done
//
// Cohort sampling: a client that checks in while a round is collecting is
// assigned iff PRF_key(aggregation round, client id) < q, with a secret
// 256-bit key kept in the store. Each client is thus included independently
// with probability q at most (it may also never check in), the Poisson
// subsampling the accountant charges (Abadi et al. 2016; Mironov, Talwar &
// Zhang 2019). A client cannot re-roll its draw by checking in again, nor
// predict it. [I] max_reports caps assignments and target_reports closes a
// round early; both make inclusion depend on other clients, which the
// Poisson analysis does not cover: set target_reports = 0 and max_reports
// above q * population for the guarantee to apply as stated.
//
// Stragglers: a round closes at its deadline with whatever was uploaded;
// clients that never report are dropped (the aggregators count only reports
// both verified). Restart: everything is rebuilt from the store; an open round
// is resumed with the same aggregation round id and deadline (the aggregators'
// OpenRound is idempotent), so accepted reports are kept.
//
// Thread safety: CheckIn, ModelBlob, UploadDone, AddBytesDown, Status and
// MetricsText are thread-safe and never block on aggregator RPCs; Tick must
// be called from one thread at a time.
// Error codes: INVALID_ARGUMENT for malformed requests, NOT_FOUND for an
// unknown task or model version, FAILED_PRECONDITION for requests that do
// not fit the round's state (no assignment, round closed).
#ifndef TANDEM_SERVER_CORE_COORDINATOR_H_
#define TANDEM_SERVER_CORE_COORDINATOR_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/random.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "ml/train/trainer.h"
#include "proto/coordinator.pb.h"
#include "server/core/aggregator_client.h"
#include "server/core/federated_task.h"
#include "server/store/coordinator_store.h"

namespace tandem::server {

struct CoordinatorOptions {
  std::string task_id = "default";  // [A-Za-z0-9._-]{1,64}
  // Model, FedLUAR, optimizer, q, privacy budget; task.secure_sum carries the
  // PREAMBLE/DP parameters (its task_id is set to task_id).
  FederatedTaskOptions task;
  proto::ModelSpec model;           // MLP the clients train
  uint64_t init_seed = 1;           // initial weights
  uint64_t rounds = 5;              // released rounds to run
  uint32_t target_reports = 0;      // close early at this many uploads (0 = at the deadline)
  uint32_t min_reports = 1;         // quorum at the deadline
  absl::Duration round_timeout = absl::Seconds(30);
  // Check-ins are assigned only during the first enrollment_window of a
  // round (0 = the whole round); once it is over and every assigned client
  // has uploaded, the round closes without waiting for the deadline. With
  // all clients polling more often than the window, this keeps the Poisson
  // sampling exact and rounds short.
  absl::Duration enrollment_window = absl::ZeroDuration();
  absl::Duration retry_after = absl::Milliseconds(500);
  proto::TrainingConfig training;   // client settings (model/fixed point/recycled set filled in)
  proto::Endpoint leader;           // announced to clients
  proto::Endpoint helper;
  int eval_threads = 1;
};

class Coordinator {
 public:
  // Validates the options, restores the task from `store` (checkpoint and
  // open round) or starts it fresh. Pointers are not owned and must outlive
  // the coordinator. INVALID_ARGUMENT for bad options, FAILED_PRECONDITION
  // when the store holds a task with another configuration.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options, ml::Dataset eval_data, AggregatorClient* leader,
      AggregatorClient* helper, std::unique_ptr<CoordinatorStore> store, const Clock* clock,
      SecureRandom* random);

  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& request);
  // The serialized proto::Model of `version` (only the current one is kept).
  absl::StatusOr<std::shared_ptr<const std::string>> ModelBlob(const std::string& task_id,
                                                               uint64_t version);
  absl::Status UploadDone(const proto::UploadDoneRequest& request);
  void AddBytesDown(uint64_t bytes);
  proto::CoordinatorStatusResponse Status();
  // Prometheus text exposition format (version 0.0.4).
  std::string MetricsText();

  // Advances the state machine by at most one transition. Errors are the
  // store's (the daemon logs them and retries); aggregator errors are
  // handled inside (retry until the deadline, then abandon).
  absl::Status Tick();
  bool done();

 private:
  enum class Phase { kIdle, kOpening, kCollecting, kFinalizing, kDone };
  struct Assignment {
    bool done = false;
    std::string report_id;
    uint64_t bytes_up = 0;
  };

  Coordinator(CoordinatorOptions options, ml::Dataset eval, AggregatorClient* leader,
              AggregatorClient* helper, std::unique_ptr<CoordinatorStore> store,
              const Clock* clock);
  absl::Status Restore();
  absl::Status StartRound();
  absl::Status TryOpen();
  absl::Status Finalize();
  absl::Status Abandon(const std::string& why);
  absl::Status Evaluate(double* accuracy, double* loss);
  void PublishModel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Sampled(uint64_t aggregation_round, const std::string& client_id) const;
  // Status() without the round history.
  proto::CoordinatorStatusResponse StatusLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NowMs() const;
  bool EnrollmentOver(int64_t now_ms) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static const char* PhaseName(Phase p);

  const CoordinatorOptions options_;
  const ml::Dataset eval_;
  AggregatorClient* const leader_;
  AggregatorClient* const helper_;
  std::unique_ptr<CoordinatorStore> store_;
  const Clock* const clock_;
  std::array<uint8_t, 32> sampling_key_{};

  // Touched by Tick() only (one thread).
  std::unique_ptr<FederatedTask> task_;
  std::unique_ptr<ml::Model> model_;
  std::unique_ptr<ml::GradientEngine> engine_;
  std::optional<RoundPlan> plan_;

  absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kIdle;
  std::string done_reason_ ABSL_GUARDED_BY(mu_);
  uint64_t aggregation_round_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t model_version_ ABSL_GUARDED_BY(mu_) = 0;  // of the published model
  int64_t opened_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t deadline_ms_ ABSL_GUARDED_BY(mu_) = 0;
  proto::CheckInResponse assignment_ ABSL_GUARDED_BY(mu_);  // template of this round's TASK
  std::map<std::string, Assignment> assigned_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::string> model_blob_ ABSL_GUARDED_BY(mu_);
  uint64_t round_bytes_down_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<proto::RoundSummary> history_ ABSL_GUARDED_BY(mu_);
  double epsilon_ ABSL_GUARDED_BY(mu_) = 0;
  // Counters for the metrics (since process start).
  std::map<std::string, uint64_t> checkins_ ABSL_GUARDED_BY(mu_);
  uint64_t abandoned_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_up_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_down_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_COORDINATOR_H_
