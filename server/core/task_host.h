// One coordinator, many tasks (issue 33 items 2, 3 and 7): the tasks a
// tandem-coordinator process runs side by side, each a Coordinator with its
// own rounds, cohort sampling, store, released models and accountant,
// driven by its own thread; the task registry (store/task_store.h) that
// says which exist; the routing of the client API to them; and the
// operator's task API (create, list, show, pause, resume, delete).
//
// Tasks come from two places: the command line's task (Adopt, origin
// "flags", re-created at every start from the flags) and the operator's
// CreateTask (origin "api": the document and an opaque model's initial
// weights are kept under tasks_dir/<id>/ and the task is re-created from
// them at every start). Either kind can be paused, resumed and deleted; the
// registry remembers it across restarts (SIGKILL included: each change is
// durable before it is acknowledged).
//
// Check-ins are authenticated once (DeviceRegistry::Authenticate: proof of
// possession, replay, enrollment) before any task is looked at; a check-in
// naming no task is offered to every active task in turn, starting at a
// rotating one, and gets the first assignment. Each task still samples
// every client independently with its own key (coordinator.h), so a client
// is included in a task's round with probability q at most, as the
// accountant assumes. A client that can serve only some tasks (its data,
// its framework) names its task.
//
// Deleting a task first marks it deleted in the registry, then stops its
// driver and ends an open round without a release (Coordinator::Cancel):
// after a crash between the two the task is not restarted, so its round
// never reaches Finalize either. A deleted task's id is never reused (the
// aggregators keep that task's rounds under it); its released models stay.
// The aggregators are told (AggregatorClient::AbandonRound): each closes
// the round for good, unreleased, and drops its advance charge from the
// population's ledger (aggregator/core/population.cc). Best effort: an
// aggregator that cannot be reached keeps the charge, which errs on the
// safe side (budget counted, nothing released).
//
// Thread safety: every method is thread-safe. Ownership: the host owns its
// tasks (each Coordinator with its evaluator); devices and store are not
// owned and must outlive the host. Error codes: NOT_FOUND for an unknown
// task, ALREADY_EXISTS for an id in use or used before, FAILED_PRECONDITION
// for a change a task's state does not allow or a host without a registry,
// RESOURCE_EXHAUSTED beyond max_tasks, INVALID_ARGUMENT for a bad document
// (the factory's, naming the field), store errors as they come.
#ifndef TANDEM_SERVER_CORE_TASK_HOST_H_
#define TANDEM_SERVER_CORE_TASK_HOST_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "proto/task_admin.pb.h"
#include "server/core/coordinator.h"
#include "server/core/device_registry.h"
#include "server/store/task_store.h"

namespace tandem::server {

// What runs one task: the coordinator and the evaluator it points to
// (destroyed after it; null = in process).
struct TaskParts {
  std::unique_ptr<ModelEvaluator> evaluator;
  std::unique_ptr<Coordinator> coordinator;
  TaskParts() = default;
  TaskParts(TaskParts&&) = default;
  TaskParts& operator=(TaskParts&&) = default;
  ~TaskParts() { coordinator.reset(); }  // before its evaluator
};

// Builds an API task from its document (the daemon's: aggregator clients,
// ticket key, datasets, worker). `task_dir` holds the task's store and the
// document's files (an opaque model's weights_file is relative to it).
// INVALID_ARGUMENT naming the field for a bad document.
using TaskFactory = std::function<absl::StatusOr<TaskParts>(const proto::TaskSpec& spec,
                                                            const std::string& task_dir)>;

struct TaskHostOptions {
  DeviceRegistry* devices = nullptr;  // required: authenticates every check-in
  // The registry and the API tasks' directories (tasks_dir/<id>/) and
  // factory; with store null the host runs only adopted tasks and its task
  // API answers FAILED_PRECONDITION.
  TaskStore* store = nullptr;
  std::string tasks_dir;
  TaskFactory factory;
  // Released models of task <id> live in models_root/<id> (ExportPath).
  std::string models_root;
  const Clock* clock = nullptr;                   // required
  absl::Duration tick = absl::Milliseconds(50);   // each driver's period
  size_t max_tasks = 64;                          // live (not deleted) tasks
  absl::Duration retry_after = absl::Seconds(1);  // check-ins while no task runs
};

class TaskHost {
 public:
  // Loads the registry (not its tasks: Start does). INVALID_ARGUMENT for
  // missing devices/clock, or a store without factory and tasks_dir.
  static absl::StatusOr<std::unique_ptr<TaskHost>> Create(TaskHostOptions options);
  ~TaskHost();  // Stop()

  // The command line's task, `spec` its document when it came from one.
  // Started paused when the registry says so; not started at all (and OK)
  // when an operator deleted it; FAILED_PRECONDITION when the id is an API
  // task's. Its driver starts with Start().
  absl::Status Adopt(TaskParts parts, const proto::TaskSpec& spec);
  // Re-creates every active or paused API task of the registry and starts
  // every driver. A task that can no longer be built is logged and left
  // out (its row stays), so one bad document does not stop the others.
  absl::Status Start();
  // Stops every driver (idempotent); tasks stay as they are. Not
  // concurrently with Delete (stop the listeners first).
  void Stop();

  // The client API, routed by task id (see the file comment).
  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& request,
                                                 absl::string_view source);
  absl::StatusOr<std::shared_ptr<const std::string>> ModelBlob(const std::string& task_id,
                                                               uint64_t version);
  absl::Status UploadDone(const proto::UploadDoneRequest& request);
  void AddBytesDown(const std::string& task_id, uint64_t bytes);
  // The full status of a live task; an empty id names the command line's
  // task, or the only live task (INVALID_ARGUMENT when several run).
  absl::StatusOr<proto::CoordinatorStatusResponse> Status(const std::string& task_id);
  // The live tasks' coordinators (metrics); each shared pointer keeps its
  // task's parts alive.
  std::vector<std::shared_ptr<Coordinator>> Coordinators();
  // The command line's task, or null (none, or deleted).
  std::shared_ptr<Coordinator> BootTask();
  DeviceRegistry& devices() { return *options_.devices; }

  // The operator's task API; `op` is the operator's identity (audit).
  absl::StatusOr<proto::TaskInfo> CreateTask(const proto::CreateTaskRequest& request,
                                             const std::string& op);
  absl::StatusOr<proto::TaskInfo> Get(const std::string& task_id);  // with history
  std::vector<proto::TaskInfo> List();                              // without history
  absl::StatusOr<proto::TaskInfo> Pause(const std::string& task_id, const std::string& op);
  absl::StatusOr<proto::TaskInfo> Resume(const std::string& task_id, const std::string& op);
  absl::StatusOr<proto::TaskInfo> Delete(const std::string& task_id, const std::string& op);
  // The file of `version` (0 = the latest) of a task's released models;
  // NOT_FOUND for an unknown task or version.
  absl::StatusOr<std::pair<uint64_t, std::string>> ExportPath(const std::string& task_id,
                                                              uint64_t version);

 private:
  struct Live {
    std::shared_ptr<TaskParts> parts;
    std::shared_ptr<std::atomic<bool>> stop;
    std::thread driver;
  };
  explicit TaskHost(TaskHostOptions options) : options_(std::move(options)) {}
  std::shared_ptr<Coordinator> Find(const std::string& task_id);
  // Find, or NOT_FOUND naming the task (the client API's routing).
  absl::StatusOr<std::shared_ptr<Coordinator>> Routed(const std::string& task_id);
  // The registry row of a task an operator may still change: NOT_FOUND for
  // an unknown one, FAILED_PRECONDITION for a deleted one.
  absl::StatusOr<proto::TaskInfo*> ChangeableLocked(const std::string& task_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `info` moved to `state` by `op`, durable in the store before it is
  // changed in memory; the new row.
  absl::StatusOr<proto::TaskInfo> RecordLocked(proto::TaskInfo* info, const std::string& state,
                                               const std::string& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers `parts` live under its id and starts its driver when started_.
  void AddLive(std::shared_ptr<TaskParts> parts, bool paused) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void StartDriver(Live* live, absl::Duration tick);
  static void StopDriver(Live* live);
  // Applies `state` ("paused"/"active") to a live task and records it.
  absl::StatusOr<proto::TaskInfo> SetState(const std::string& task_id, const std::string& state,
                                           const std::string& op);
  // info with the live task's status (history when `history`).
  proto::TaskInfo WithStatus(proto::TaskInfo info, bool history) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NowMs() const;

  const TaskHostOptions options_;
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::string boot_task_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, proto::TaskInfo> infos_ ABSL_GUARDED_BY(mu_);  // every registered task
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);                // ids, creation order
  std::map<std::string, Live> live_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> creating_ ABSL_GUARDED_BY(mu_);  // ids being created
  std::atomic<uint64_t> rotation_{0};                          // where an any-task check-in starts
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_TASK_HOST_H_
