#include "server/core/task_host.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/ids.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "server/core/released_models.h"

namespace tandem::server {
namespace {

constexpr char kActive[] = "active";
constexpr char kPaused[] = "paused";
constexpr char kDeleted[] = "deleted";
constexpr char kWeightsFile[] = "init.safetensors";
// What an API task's weights may take over the task API (its message cap is
// a little above).
constexpr size_t kMaxWeightsBytes = size_t{48} << 20;

// A task id that is also a safe directory name: the id rule and no leading
// dot ("." and ".." are valid ids but name no directory of their own).
absl::Status ValidateTaskId(const std::string& id) {
  TANDEM_RETURN_IF_ERROR(ValidateId(id, "task_spec.task_id"));
  if (id.front() == '.') {
    return absl::InvalidArgumentError("task_spec.task_id must not start with '.'");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TaskHost>> TaskHost::Create(TaskHostOptions options) {
  if (options.devices == nullptr || options.clock == nullptr) {
    return absl::InvalidArgumentError("the task host needs the device registry and a clock");
  }
  if (options.store != nullptr && (!options.factory || options.tasks_dir.empty())) {
    return absl::InvalidArgumentError("a task registry needs a task factory and tasks_dir");
  }
  std::unique_ptr<TaskHost> host(new TaskHost(std::move(options)));
  if (host->options_.store != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<proto::TaskInfo> tasks, host->options_.store->Load());
    absl::MutexLock lock(&host->mu_);
    for (proto::TaskInfo& t : tasks) {
      host->order_.push_back(t.task_id());
      host->infos_[t.task_id()] = std::move(t);
    }
  }
  return host;
}

TaskHost::~TaskHost() { Stop(); }

int64_t TaskHost::NowMs() const { return absl::ToUnixMillis(options_.clock->Now()); }

void TaskHost::StartDriver(Live* live, absl::Duration tick) {
  live->driver = std::thread([parts = live->parts, stop = live->stop, tick] {
    while (!*stop) {
      if (absl::Status s = parts->coordinator->Tick(); !s.ok()) {
        TANDEM_LOG(ERROR) << "task " << parts->coordinator->task_id() << ": " << s << " (retrying)";
      }
      absl::SleepFor(tick);
    }
  });
}

void TaskHost::StopDriver(Live* live) {
  *live->stop = true;
  if (live->driver.joinable()) live->driver.join();
}

void TaskHost::AddLive(std::shared_ptr<TaskParts> parts, bool paused) {
  parts->coordinator->SetPaused(paused);
  Live live{std::move(parts), std::make_shared<std::atomic<bool>>(false), std::thread()};
  if (started_) StartDriver(&live, options_.tick);
  const std::string id = live.parts->coordinator->task_id();
  live_.emplace(id, std::move(live));
}

absl::Status TaskHost::Adopt(TaskParts parts, const proto::TaskSpec& spec) {
  if (parts.coordinator == nullptr) return absl::InvalidArgumentError("no coordinator to adopt");
  const std::string id = parts.coordinator->task_id();
  absl::MutexLock lock(&mu_);
  auto it = infos_.find(id);
  if (it != infos_.end() && it->second.origin() == "api") {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", id, " was created through the task API; the command line names another task"));
  }
  if (live_.count(id) > 0) return absl::AlreadyExistsError(absl::StrCat("task ", id, " runs"));
  if (it != infos_.end() && it->second.state() == kDeleted) {
    TANDEM_LOG(WARNING) << "task " << id << " was deleted by " << it->second.updated_by()
                        << "; the command line's task does not run";
    return absl::OkStatus();
  }
  proto::TaskInfo info = it != infos_.end() ? it->second : proto::TaskInfo();
  if (it == infos_.end()) {
    info.set_task_id(id);
    info.set_state(kActive);
    info.set_origin("flags");
    info.set_created_unix_ms(NowMs());
    info.set_updated_unix_ms(NowMs());
    order_.push_back(id);
  }
  *info.mutable_spec() = spec;
  if (options_.store != nullptr) TANDEM_RETURN_IF_ERROR(options_.store->Put(info));
  const bool paused = info.state() == kPaused;
  infos_[id] = std::move(info);
  boot_task_ = id;
  AddLive(std::make_shared<TaskParts>(std::move(parts)), paused);
  return absl::OkStatus();
}

absl::Status TaskHost::Start() {
  std::vector<proto::TaskInfo> to_build;
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::OkStatus();
    for (const std::string& id : order_) {
      const proto::TaskInfo& t = infos_[id];
      if (t.origin() == "api" && t.state() != kDeleted && live_.count(id) == 0) {
        to_build.push_back(t);
      }
    }
  }
  // Built outside the lock (each opens its store and restores its round).
  std::vector<std::pair<std::shared_ptr<TaskParts>, bool>> built;
  for (const proto::TaskInfo& t : to_build) {
    const std::string dir = (std::filesystem::path(options_.tasks_dir) / t.task_id()).string();
    absl::StatusOr<TaskParts> parts = options_.factory(t.spec(), dir);
    if (!parts.ok()) {
      TANDEM_LOG(ERROR) << "task " << t.task_id() << " cannot be re-created: " << parts.status();
      continue;
    }
    built.emplace_back(std::make_shared<TaskParts>(*std::move(parts)), t.state() == kPaused);
  }
  absl::MutexLock lock(&mu_);
  for (auto& [parts, paused] : built) AddLive(std::move(parts), paused);
  started_ = true;
  for (auto& [id, live] : live_) {
    if (!live.driver.joinable()) StartDriver(&live, options_.tick);
  }
  return absl::OkStatus();
}

void TaskHost::Stop() {
  std::vector<Live*> lives;
  {
    absl::MutexLock lock(&mu_);
    started_ = false;
    for (auto& [id, live] : live_) *live.stop = true;
    for (auto& [id, live] : live_) lives.push_back(&live);
  }
  // Joined outside the lock (a Tick may wait on an aggregator); live_ keeps
  // its entries, so the pointers stay valid as long as no Delete runs
  // meanwhile (the daemon stops its listeners first).
  for (Live* live : lives) StopDriver(live);
}

std::shared_ptr<Coordinator> TaskHost::Find(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(task_id);
  if (it == live_.end()) return nullptr;
  return std::shared_ptr<Coordinator>(it->second.parts, it->second.parts->coordinator.get());
}

absl::StatusOr<std::shared_ptr<Coordinator>> TaskHost::Routed(const std::string& task_id) {
  std::shared_ptr<Coordinator> c = Find(task_id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no task '", task_id, "' here"));
  return c;
}

std::vector<std::shared_ptr<Coordinator>> TaskHost::Coordinators() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Coordinator>> out;
  for (auto& [id, live] : live_) {
    out.emplace_back(live.parts, live.parts->coordinator.get());
  }
  return out;
}

std::shared_ptr<Coordinator> TaskHost::BootTask() {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    id = boot_task_;
  }
  return id.empty() ? nullptr : Find(id);
}

absl::StatusOr<proto::CheckInResponse> TaskHost::CheckIn(const proto::CheckInRequest& request,
                                                         absl::string_view source) {
  // Who is asking, before any task is looked at (and only once).
  TANDEM_ASSIGN_OR_RETURN(const crypto::Ed25519VerifyingKey device,
                          options_.devices->Authenticate(request, source));
  if (!request.task_id().empty()) {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Coordinator> c, Routed(request.task_id()));
    return c->CheckInAuthenticated(request, device);
  }
  std::vector<std::shared_ptr<Coordinator>> tasks = Coordinators();
  proto::CheckInResponse retry;
  retry.set_outcome(proto::CheckInResponse::OUTCOME_RETRY_LATER);
  retry.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));
  if (tasks.empty()) return retry;
  const size_t start = rotation_.fetch_add(1) % tasks.size();
  bool all_done = true, have_retry = false;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Coordinator& c = *tasks[(start + i) % tasks.size()];
    if (c.paused()) {
      all_done = false;
      continue;
    }
    absl::StatusOr<proto::CheckInResponse> r = c.CheckInAuthenticated(request, device);
    if (!r.ok()) return r.status();
    if (r->outcome() == proto::CheckInResponse::OUTCOME_TASK) return r;
    if (r->outcome() == proto::CheckInResponse::OUTCOME_DONE) continue;
    all_done = false;
    if (!have_retry || r->retry_after_ms() < retry.retry_after_ms()) {
      retry = *std::move(r);
      have_retry = true;
    }
  }
  if (all_done) {
    proto::CheckInResponse done;
    done.set_outcome(proto::CheckInResponse::OUTCOME_DONE);
    return done;
  }
  return retry;
}

absl::StatusOr<std::shared_ptr<const std::string>> TaskHost::ModelBlob(const std::string& task_id,
                                                                       uint64_t version) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Coordinator> c, Routed(task_id));
  return c->ModelBlob(task_id, version);
}

absl::Status TaskHost::UploadDone(const proto::UploadDoneRequest& request) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Coordinator> c, Routed(request.task_id()));
  return c->UploadDone(request);
}

void TaskHost::AddBytesDown(const std::string& task_id, uint64_t bytes) {
  if (std::shared_ptr<Coordinator> c = Find(task_id)) c->AddBytesDown(bytes);
}

absl::StatusOr<proto::CoordinatorStatusResponse> TaskHost::Status(const std::string& task_id) {
  std::string id = task_id;
  if (id.empty()) {
    absl::MutexLock lock(&mu_);
    if (!boot_task_.empty() && live_.count(boot_task_) > 0) {
      id = boot_task_;
    } else if (live_.size() == 1) {
      id = live_.begin()->first;
    } else if (live_.empty()) {
      return absl::NotFoundError("no task runs here");
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("this coordinator runs ", live_.size(), " tasks: name one (task_id)"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Coordinator> c, Routed(id));
  return c->Status();
}

proto::TaskInfo TaskHost::WithStatus(proto::TaskInfo info, bool history) {
  auto it = live_.find(info.task_id());
  if (it == live_.end()) return info;
  // Coordinator::Status takes only the coordinator's own lock.
  *info.mutable_status() = it->second.parts->coordinator->Status();
  if (!history) info.mutable_status()->clear_history();
  return info;
}

absl::StatusOr<proto::TaskInfo> TaskHost::CreateTask(const proto::CreateTaskRequest& request,
                                                     const std::string& op) {
  if (options_.store == nullptr) {
    return absl::FailedPreconditionError("this coordinator has no task registry");
  }
  proto::TaskSpec spec = request.spec();
  const std::string id = spec.task_id();
  TANDEM_RETURN_IF_ERROR(ValidateTaskId(id));
  if (request.weights().size() > kMaxWeightsBytes) {
    return absl::InvalidArgumentError("weights: larger than the task API's 48 MiB");
  }
  if (request.weights().empty() && !spec.model().weights_file().empty()) {
    return absl::InvalidArgumentError(
        "task_spec.model.weights_file: send the file's bytes as the request's weights (the "
        "coordinator reads no operator paths)");
  }
  {
    absl::MutexLock lock(&mu_);
    if (infos_.count(id) > 0 || creating_.count(id) > 0) {
      const bool deleted = infos_.count(id) > 0 && infos_[id].state() == kDeleted;
      return absl::AlreadyExistsError(absl::StrCat(
          "task ", id, deleted ? " was deleted (a task id is never reused)" : " exists"));
    }
    if (live_.size() + creating_.size() >= options_.max_tasks) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this coordinator runs its most tasks (", options_.max_tasks, ")"));
    }
    creating_[id] = true;
  }
  const std::string dir = (std::filesystem::path(options_.tasks_dir) / id).string();
  auto unreserve = [&] {
    absl::MutexLock lock(&mu_);
    creating_.erase(id);
  };
  // A directory without a registry row is a create that crashed before its
  // row: nothing refers to it.
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    unreserve();
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  absl::Status s = absl::OkStatus();
  if (!request.weights().empty()) {
    spec.mutable_model()->set_weights_file(kWeightsFile);
    s = WriteFileAtomically((std::filesystem::path(dir) / kWeightsFile).string(), request.weights(),
                            0600);
  }
  absl::StatusOr<TaskParts> parts = s.ok() ? options_.factory(spec, dir) : s;
  proto::TaskInfo info;
  info.set_task_id(id);
  info.set_state(kActive);
  info.set_origin("api");
  *info.mutable_spec() = spec;
  info.set_created_unix_ms(NowMs());
  info.set_updated_unix_ms(NowMs());
  info.set_updated_by(op);
  if (parts.ok()) s = options_.store->Put(info);
  if (!parts.ok() || !s.ok()) {
    if (parts.ok()) parts->coordinator.reset();  // close its store first
    std::filesystem::remove_all(dir, ec);
    unreserve();
    return parts.ok() ? s : parts.status();
  }
  TANDEM_LOG(INFO) << "task " << id << " created by " << op;
  absl::MutexLock lock(&mu_);
  creating_.erase(id);
  order_.push_back(id);
  infos_[id] = info;
  AddLive(std::make_shared<TaskParts>(*std::move(parts)), false);
  return WithStatus(std::move(info), false);
}

absl::StatusOr<proto::TaskInfo> TaskHost::Get(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = infos_.find(task_id);
  if (it == infos_.end()) return absl::NotFoundError(absl::StrCat("no task '", task_id, "'"));
  return WithStatus(it->second, true);
}

std::vector<proto::TaskInfo> TaskHost::List() {
  absl::MutexLock lock(&mu_);
  std::vector<proto::TaskInfo> out;
  for (const std::string& id : order_) out.push_back(WithStatus(infos_[id], false));
  return out;
}

absl::StatusOr<proto::TaskInfo*> TaskHost::ChangeableLocked(const std::string& task_id) {
  auto it = infos_.find(task_id);
  if (it == infos_.end()) return absl::NotFoundError(absl::StrCat("no task '", task_id, "'"));
  if (it->second.state() == kDeleted) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task_id, " was deleted"));
  }
  return &it->second;
}

absl::StatusOr<proto::TaskInfo> TaskHost::RecordLocked(proto::TaskInfo* info,
                                                       const std::string& state,
                                                       const std::string& op) {
  proto::TaskInfo next = *info;
  next.set_state(state);
  next.set_updated_unix_ms(NowMs());
  next.set_updated_by(op);
  if (options_.store != nullptr) TANDEM_RETURN_IF_ERROR(options_.store->Put(next));
  *info = next;
  return next;
}

absl::StatusOr<proto::TaskInfo> TaskHost::SetState(const std::string& task_id,
                                                   const std::string& state,
                                                   const std::string& op) {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(proto::TaskInfo* const info, ChangeableLocked(task_id));
  auto live = live_.find(task_id);
  if (live == live_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " is not running here (see the coordinator's log)"));
  }
  TANDEM_ASSIGN_OR_RETURN(proto::TaskInfo next, RecordLocked(info, state, op));
  live->second.parts->coordinator->SetPaused(state == kPaused);
  TANDEM_LOG(INFO) << "task " << task_id << " " << state << " by " << op;
  return WithStatus(std::move(next), false);
}

absl::StatusOr<proto::TaskInfo> TaskHost::Pause(const std::string& task_id, const std::string& op) {
  return SetState(task_id, kPaused, op);
}

absl::StatusOr<proto::TaskInfo> TaskHost::Resume(const std::string& task_id,
                                                 const std::string& op) {
  return SetState(task_id, kActive, op);
}

absl::StatusOr<proto::TaskInfo> TaskHost::Delete(const std::string& task_id,
                                                 const std::string& op) {
  Live live;
  proto::TaskInfo next;
  {
    absl::MutexLock lock(&mu_);
    TANDEM_ASSIGN_OR_RETURN(proto::TaskInfo* const info, ChangeableLocked(task_id));
    // Durable first: after a crash from here on the task is not restarted,
    // so its open round is never finalized either.
    TANDEM_ASSIGN_OR_RETURN(next, RecordLocked(info, kDeleted, op));
    auto l = live_.find(task_id);
    if (l != live_.end()) {
      live = std::move(l->second);
      live_.erase(l);
    }
  }
  if (live.parts != nullptr) {
    StopDriver(&live);  // no Tick runs from here on
    if (absl::Status s = live.parts->coordinator->Cancel(absl::StrCat("deleted by ", op));
        !s.ok()) {
      TANDEM_LOG(ERROR) << "task " << task_id << ": ending its round: " << s;
    }
  }
  TANDEM_LOG(INFO) << "task " << task_id << " deleted by " << op;
  return next;
}

absl::StatusOr<std::pair<uint64_t, std::string>> TaskHost::ExportPath(const std::string& task_id,
                                                                      uint64_t version) {
  {
    absl::MutexLock lock(&mu_);
    if (infos_.count(task_id) == 0) {
      return absl::NotFoundError(absl::StrCat("no task '", task_id, "'"));
    }
  }
  const std::string dir = (std::filesystem::path(options_.models_root) / task_id).string();
  TANDEM_ASSIGN_OR_RETURN(version, ResolveReleasedVersion(dir, task_id, version));
  return std::make_pair(version, ReleasedModelPath(dir, version));
}

}  // namespace tandem::server
