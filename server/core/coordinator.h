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
// Devices: a check-in is the device's signed request (crypto/sign/
// device_auth.h); the registry (device_registry.h) checks the proof of
// possession, replay and enrollment before anything else, so an outsider
// can neither take slots, nor learn whether a device was sampled, nor
// obtain a ticket. The client id is the device id (a hash of its key).
//
// Upload tickets: every assignment comes with a ticket signed by the
// coordinator's Ed25519 key (proto::SignedUploadTicket over task, aggregation
// round, ticket id and expiry = the round's deadline). Both aggregators know
// the public key and accept one report per ticket; the ticket id is the
// report id. ticket_id = the first 16 bytes of HMAC-SHA256(sampling key,
// "tandem.ticket.v1" || aggregation round (8 bytes, little endian) || client
// id): unpredictable without the key, and, Ed25519 being deterministic, a
// repeated check-in and a restarted coordinator hand out the same ticket
// without storing it. UploadDone needs the client's own ticket.
//
// Privacy defaults (CoordinatorOptions, and the daemon's flags): noise
// multiplier 1.0 (discrete Gaussian sigma = 1.0 x the L2 sensitivity, per
// aggregator), norm proofs on, minimum batch 10 and a quorum of 10. The
// aggregators enforce their own policy on top (aggregator/core/policy.h).
//
// Stragglers: a round closes at its deadline with whatever was uploaded;
// clients that never report are dropped (the aggregators count only reports
// both verified). Restart: everything is rebuilt from the store; an open round
// is resumed with the same aggregation round id and deadline (the aggregators'
// OpenRound is idempotent), so accepted reports are kept.
//
// Thread safety: CheckIn, ModelBlob, UploadDone, AddBytesDown, Status and
// Metrics are thread-safe and never block on aggregator RPCs; Tick must
// be called from one thread at a time.
// Error codes: INVALID_ARGUMENT for malformed requests, UNAUTHENTICATED for
// a check-in without a valid device proof or an UploadDone without this
// client's valid ticket, PERMISSION_DENIED for a device that is not
// enrolled or is revoked, NOT_FOUND for an
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
#include "base/stall_reporter.h"
#include "crypto/sign/ed25519.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "ml/train/trainer.h"
#include "proto/coordinator.pb.h"
#include "server/core/aggregator_client.h"
#include "server/core/clock_skew.h"
#include "server/core/device_registry.h"
#include "server/core/federated_evaluation.h"
#include "server/core/federated_task.h"
#include "server/core/model_evaluator.h"
#include "server/store/coordinator_store.h"

namespace tandem::server {

// FederatedTaskOptions with the coordinator's private defaults:
// secure_sum.noise_multiplier = 1.0, secure_sum.norm_proofs = true,
// secure_sum.min_batch_size = 10 (the rest as FederatedTaskOptions).
FederatedTaskOptions PrivateTaskDefaults();

// Largest opaque model a coordinator takes (parameters; 2^27 = 512 MiB of
// float32, the aggregators' largest dimension cap).
inline constexpr int64_t kMaxOpaqueParams = int64_t{1} << 27;

struct CoordinatorOptions {
  std::string task_id = "default";  // [A-Za-z0-9._-]{1,64}
  // Model, FedLUAR, optimizer, q, privacy budget; task.secure_sum carries the
  // PREAMBLE/DP parameters (its task_id is set to task_id), by default the
  // private ones (PrivateTaskDefaults: z = 1.0, norm proofs, min batch 10).
  FederatedTaskOptions task = PrivateTaskDefaults();
  proto::ModelSpec model;           // MLP the clients train
  uint64_t init_seed = 1;           // initial weights
  uint64_t rounds = 5;              // released rounds to run
  // > 0: task.secure_sum.noise_multiplier is replaced by the least noise for
  // which the planned releases (`rounds` training rounds, rounds /
  // evaluation.every evaluations) stay within this epsilon, crediting
  // PREAMBLE's block sampling (noise_calibration.h); the budget defaults
  // to it. 0: the noise multiplier as given.
  double target_epsilon = 0;
  // > 0: task.secure_sum.log_blocks_per_group is replaced by the smallest d
  // whose reports upload at most this multiple of the honest dense baseline
  // (upload_cap.h), chosen before the noise (target_epsilon) and checked
  // again after it. 0: d as given.
  double max_upload_vs_dense = 0;
  uint32_t target_reports = 0;      // close early at this many uploads (0 = at the deadline)
  // Quorum at the deadline; must be >= task.secure_sum.min_batch_size (the
  // aggregators refuse to release fewer).
  uint32_t min_reports = 10;
  absl::Duration round_timeout = absl::Seconds(30);
  // Check-ins are assigned only during the first enrollment_window of a
  // round (0 = the whole round); once it is over and every assigned client
  // has uploaded, the round closes without waiting for the deadline. With
  // all clients polling more often than the window, this keeps the Poisson
  // sampling exact and rounds short.
  absl::Duration enrollment_window = absl::ZeroDuration();
  absl::Duration retry_after = absl::Milliseconds(500);
  proto::TrainingConfig training;   // client settings (model/fixed point/recycled set filled in)
  // The aggregators' upload endpoints announced to clients (address, TLS
  // and the TLS identity in server_name); two different aggregators.
  proto::Endpoint leader;
  proto::Endpoint helper;
  int eval_threads = 1;
  // Not owned; null = evaluate in process. With one (an ML worker), each
  // released model is pushed to it and evaluated there; when that fails the
  // coordinator evaluates in process and counts the failure (the worker is
  // an offload, never a reason to stall or abandon a round).
  ModelEvaluator* evaluator = nullptr;
  // Private federated evaluation rounds (federated_evaluation.h); off by
  // default (every = 0). With DP on, their noise must be > 0.
  FederatedEvaluationOptions evaluation;
  // An opaque model (model.tensors set; released_models.h OpaqueLayout):
  // its initial parameters, in the tensors' order. Unused for an MLP.
  std::vector<float> initial_params;
  // Every released version is written to <models_dir>/v<N>.safetensors
  // (released_models.h) once its release is durable; empty = none. A
  // failed write is logged and does not stop the task (the checkpoint
  // keeps the current version, rewritten at the next start).
  std::string models_dir;
  // Required, not owned: who may check in (device_registry.h). Every
  // check-in is authenticated by it before any round state is touched, and
  // every ticket names the device key it verified.
  DeviceRegistry* devices = nullptr;
};

// Counters since process start and the current status (without the round
// history), for monitoring.
struct CoordinatorMetrics {
  proto::CoordinatorStatusResponse status;
  // Check-ins by outcome: "task", "not_sampled", "wait", "done".
  std::map<std::string, uint64_t> checkins;
  uint64_t rounds_abandoned = 0;             // rounds closed without release
  uint64_t upload_bytes = 0;                 // bytes clients reported uploading
  uint64_t download_bytes = 0;               // model bytes streamed to clients
  uint64_t unauthenticated_upload_done = 0;  // UploadDone without a valid ticket
  // Check-ins the device registry refused, by reason (DeviceRegistry::Refusals).
  std::map<std::string, uint64_t> checkins_refused;
  uint64_t enrolled_devices = 0;  // enrolled and not revoked
  // Reports both aggregators counted in the last released round (0 before one).
  uint64_t last_round_accepted_reports = 0;
  // How long the store's writes have been failing (0: they succeed), e.g.
  // a full disk under the state directory (base/stall_reporter.h).
  double store_stalled_seconds = 0;
};

class Coordinator {
 public:
  // Validates the options, restores the task from `store` (checkpoint and
  // open round) or starts it fresh. `ticket_key` signs the upload tickets
  // (the aggregators hold its public key). Pointers are not owned and must
  // outlive the coordinator. INVALID_ARGUMENT for bad options,
  // FAILED_PRECONDITION when the store holds a task with another
  // configuration.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options, crypto::Ed25519SigningKey ticket_key,
      ml::Dataset eval_data, AggregatorClient* leader,
      AggregatorClient* helper, std::unique_ptr<CoordinatorStore> store, const Clock* clock,
      SecureRandom* random);

  // An assignment (OUTCOME_TASK, with this client's upload ticket), or
  // RETRY_LATER / DONE.
  // `source`: the caller's network address (the device registry's
  // per-address limit), empty when not known.
  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& request,
                                                 absl::string_view source = "");
  // CheckIn after the device registry authenticated `device` (the task host
  // authenticates once and offers the check-in to several tasks). NOT_FOUND
  // when request.task_id names another task.
  absl::StatusOr<proto::CheckInResponse> CheckInAuthenticated(
      const proto::CheckInRequest& request, const crypto::Ed25519VerifyingKey& device);
  // The serialized proto::Model of `version` (only the current one is kept).
  absl::StatusOr<std::shared_ptr<const std::string>> ModelBlob(const std::string& task_id,
                                                               uint64_t version);
  // UNAUTHENTICATED unless request.ticket is the one this client was given
  // for request.round_id (signature, task, round, ticket id) and report_id
  // is its ticket id.
  absl::Status UploadDone(const proto::UploadDoneRequest& request);
  void AddBytesDown(uint64_t bytes);
  proto::CoordinatorStatusResponse Status();
  // Status() without the round history (the dashboard's list of tasks):
  // no copy of every RoundSummary.
  proto::CoordinatorStatusResponse StatusSummary();
  // What the daemon's /metrics exports (server/service/coordinator_metrics.h):
  // one consistent snapshot, taken under the lock, never blocking on RPCs.
  CoordinatorMetrics Metrics();

  // Advances the state machine by at most one transition. Errors are the
  // store's (the daemon logs them and retries); aggregator errors are
  // handled inside (retry until the deadline, then abandon).
  absl::Status Tick();
  bool done();

  // Paused (the task API): check-ins get RETRY_LATER and no new round
  // starts; an open round runs to its end (assigned clients still upload).
  void SetPaused(bool paused);
  bool paused();
  // Ends the task for good (the task API's delete): an open round ends
  // without a release (recorded abandoned in the store), the phase becomes
  // done with `reason`. REQUIRES: Tick is not running and is never called
  // again. Store errors as they come (the task stays ended in memory).
  absl::Status Cancel(const std::string& reason);

  const std::string& task_id() const { return options_.task_id; }
  const std::string& models_dir() const { return options_.models_dir; }
  // The options it runs with (fixed at Create; thread-safe).
  const CoordinatorOptions& options() const { return options_; }
  // Time left until the open round's upload deadline (negative once it has
  // passed); nullopt while no round is opening or collecting. Thread-safe.
  std::optional<absl::Duration> TimeToDeadline();

 private:
  enum class Phase { kIdle, kOpening, kCollecting, kFinalizing, kDone };
  struct Assignment {
    bool recording = false;  // CheckIn is signing and storing it (no ticket yet)
    bool done = false;
    std::string report_id;
    uint64_t bytes_up = 0;
    proto::SignedUploadTicket ticket;  // what CheckIn hands out
  };

  Coordinator(CoordinatorOptions options, crypto::Ed25519SigningKey ticket_key,
              crypto::Ed25519VerifyingKey ticket_verifier, ml::Dataset eval,
              AggregatorClient* leader, AggregatorClient* helper,
              std::unique_ptr<CoordinatorStore> store, const Clock* clock);
  // In-memory state from the store (at start, and after a release that
  // could not be recorded): the checkpoint (or the task's initial state),
  // the history and the open round, which resumes in phase opening.
  absl::Status Restore();
  // The aggregators released round `round` but recording it failed with
  // `why` (a full disk, a failing store) after the in-memory task moved on:
  // back to the store's state as after a restart (Restore), and the round
  // is finalized again (the aggregators answer a released round's Finalize
  // with its share again, no second noise draw) once the backoff has
  // passed, doubling from 1 s to 30 s while it keeps failing.
  absl::Status RecoverFromStore(uint64_t round, const absl::Status& why);
  // The release after Finalize decoded `agg`: the update applied, the model
  // evaluated, checkpoint and summary recorded in one store transaction.
  absl::Status RecordRelease(uint64_t round, const DecodedAggregate& agg,
                             proto::RoundSummary summary);
  // `s`, a store write's outcome, after telling store_stall_ (which logs
  // when the writes start failing, every 30 s while they do, and when
  // they succeed again). Thread-safe.
  absl::Status Stored(absl::Status s);
  absl::Status StartRound();
  absl::Status TryOpen();
  absl::Status Finalize();
  absl::Status Abandon(const std::string& why);
  // Federated evaluation rounds (coordinator_evaluation.cc), on the Tick
  // thread. An evaluation round is one whose eval_sum_ is set (plan_ is
  // not); its OpenRoundRecord names the version it evaluates (a training
  // round's names the version it produces, one more).
  bool EvaluationDue() const;
  // PlanEvaluation, then begins the round in the store.
  absl::Status StartEvaluation();
  // Charges the accountant for an evaluation round (RESOURCE_EXHAUSTED
  // when the budget cannot pay, nothing charged) and sets eval_sum_: at its
  // start, and after a restart with one open (charged again from the
  // checkpoint before it).
  absl::Status PlanEvaluation();
  // What an evaluation round's clients receive (EvaluationConfigOf).
  proto::EvaluationConfig ClientEvaluationConfig() const;
  // The noise multiplier of evaluation rounds.
  double EvaluationNoise() const;
  absl::Status FinalizeEvaluation(uint64_t round, proto::RoundSummary summary);
  // Begins aggregation round last + 1 in the store for `model_version`
  // (the round's timing), REQUIRES nothing planned yet in memory.
  absl::StatusOr<OpenRoundRecord> BeginAggregationRound(uint64_t model_version);
  // The round `rec` began: its state in memory, phase opening.
  void EnterOpening(const OpenRoundRecord& rec) ABSL_LOCKS_EXCLUDED(mu_);
  // The released model's held-out loss and accuracy; sets
  // summary->evaluated_by.
  absl::Status Evaluate(proto::RoundSummary* summary);
  void PublishModel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current version's safetensors file in options_.models_dir, unless
  // there is none to write or it exists already (`only_if_missing`).
  void WriteReleasedModelFile(bool only_if_missing);
  // HMAC-SHA256 under the sampling key of `tag` || round (8 bytes LE) ||
  // client id; false on an OpenSSL failure.
  bool Prf(absl::string_view tag, uint64_t aggregation_round, const std::string& client_id,
           std::array<uint8_t, 32>* out) const;
  bool Sampled(uint64_t aggregation_round, const std::string& client_id) const;
  // The 16-byte ticket id of (round, client); INTERNAL on an OpenSSL failure.
  absl::StatusOr<std::string> TicketId(uint64_t aggregation_round,
                                       const std::string& client_id) const;
  absl::StatusOr<proto::SignedUploadTicket> IssueTicket(uint64_t aggregation_round,
                                                        int64_t deadline_unix_ms,
                                                        const std::string& client_id,
                                                        const std::string& device_public_key) const;
  // The UNAUTHENTICATED checks of UploadDone (no state needed).
  absl::Status CheckUploadTicket(const proto::UploadDoneRequest& request) const;
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
  ClockSkewMonitor skew_;  // the aggregators' clocks, read at each OpenRound
  StallReporter store_stall_{"the coordinator's store writes", "writes",
                             "check-ins and uploads are refused (devices retry) and a "
                             "released round waits to be recorded"};
  std::array<uint8_t, 32> sampling_key_{};
  const crypto::Ed25519SigningKey ticket_key_;
  const crypto::Ed25519VerifyingKey ticket_verifier_;  // its public half

  // Touched by Tick() only (one thread).
  std::unique_ptr<FederatedTask> task_;
  std::unique_ptr<ml::Model> model_;   // null for an opaque model
  std::vector<ml::ParamInfo> layout_;  // the model's tensors, either way
  std::unique_ptr<ml::GradientEngine> engine_;
  std::optional<RoundPlan> plan_;
  std::optional<SecureSum> eval_sum_;    // set during an evaluation round
  double eval_epsilon_after_ = 0;        // epsilon once that round is released
  uint64_t last_evaluated_version_ = 0;  // 0: none (also a skipped evaluation)
  bool resumed_round_ = false;           // the open round came from the store (Restore)
  proto::TaskCheckpoint initial_checkpoint_;  // the task before any round (Restore)
  int64_t record_retry_after_ms_ = 0;         // RecoverFromStore's backoff
  absl::Duration record_backoff_ = absl::ZeroDuration();

  absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kIdle;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
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
  proto::FederatedEvaluation last_evaluation_ ABSL_GUARDED_BY(mu_);
  double epsilon_ ABSL_GUARDED_BY(mu_) = 0;
  // Counters for the metrics (since process start).
  std::map<std::string, uint64_t> checkins_ ABSL_GUARDED_BY(mu_);
  uint64_t abandoned_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_up_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_down_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unauthenticated_ ABSL_GUARDED_BY(mu_) = 0;  // UploadDone without a valid ticket
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_COORDINATOR_H_
