#include "aggregator/service/admin_service.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/grpc_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "google/protobuf/text_format.h"

namespace tandem::aggregator {
namespace {

proto::PrivacyPolicy ToProto(const Policy& p) {
  proto::PrivacyPolicy out;
  out.set_min_noise_multiplier(p.min_noise_multiplier);
  out.set_min_batch_size(p.min_batch_size);
  out.set_max_dimension(p.max_dimension);
  out.set_max_reports_per_round(p.max_reports_per_round);
  out.set_max_sent_values(p.max_sent_values);
  out.set_epsilon_budget(p.epsilon_budget);
  out.set_delta(p.delta);
  out.set_sampling_rate(p.sampling_rate);
  out.set_require_norm_proofs(p.require_norm_proofs);
  return out;
}

const proto::TaskPolicy* Find(const google::protobuf::RepeatedPtrField<proto::TaskPolicy>& tasks,
                              const std::string& id) {
  for (const proto::TaskPolicy& t : tasks) {
    if (t.task_id() == id) return &t;
  }
  return nullptr;
}

grpc::Status ReplicatedRefusal() {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "a replicated aggregator takes its tasks from its config (task_policies), "
                      "which its replicas share");
}

}  // namespace

std::string ProvisionedTasksPath(const std::string& state_path) {
  return (std::filesystem::path(state_path) / "provisioned.textproto").string();
}

absl::StatusOr<proto::ProvisionedTasks> ReadProvisionedTasks(const std::string& path) {
  proto::ProvisionedTasks out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream in(path);
  if (!in) return absl::PermissionDeniedError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a ProvisionedTasks textproto (proto/aggregator_admin.proto)"));
  }
  return out;
}

absl::StatusOr<PolicySet> PoliciesWithProvisioned(const proto::AggregatorConfig& config,
                                                  const proto::ProvisionedTasks& provisioned) {
  proto::AggregatorConfig merged = config;
  for (const proto::TaskPolicy& t : provisioned.tasks()) {
    if (Find(config.task_policies(), t.task_id()) == nullptr) *merged.add_task_policies() = t;
  }
  TANDEM_ASSIGN_OR_RETURN(PolicySet set, PolicySet::FromConfig(merged));
  for (const proto::TaskPolicy& t : provisioned.tasks()) {
    // Listed in the config too (an operator copying it there): it must say
    // the same, or the promise to the devices would depend on the order.
    if (!set.Holds(t, config.default_policy())) {
      return absl::InvalidArgumentError(
          absl::StrCat("task '", t.task_id(),
                       "' is in task_policies and in provisioned.textproto with other terms"));
    }
  }
  for (const std::string& id : provisioned.retired()) {
    absl::StatusOr<PolicySet> retired = set.Retired(id);
    if (absl::IsNotFound(retired.status())) continue;  // dropped from the config since
    if (!retired.ok()) return retired.status();
    set = *std::move(retired);
  }
  return set;
}

AggregatorAdminService::AggregatorAdminService(Aggregator* aggregator, const CallerGate* gate,
                                               proto::AggregatorConfig config,
                                               proto::ProvisionedTasks provisioned)
    : aggregator_(aggregator),
      gate_(gate),
      config_(std::move(config)),
      replicated_(!config_.replica_id().empty() || !config_.postgres_conninfo().empty()),
      provisioned_(std::move(provisioned)) {}

absl::Status AggregatorAdminService::CommitLocked(proto::ProvisionedTasks next,
                                                  PolicySet policies) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(next, &text)) {
    return absl::InternalError("cannot print the provisioned tasks");
  }
  TANDEM_RETURN_IF_ERROR(
      WriteFileAtomically(ProvisionedTasksPath(config_.state_path()), text, 0600));
  aggregator_->SetPolicies(std::move(policies));
  provisioned_ = std::move(next);
  return absl::OkStatus();
}

grpc::Status AggregatorAdminService::ProvisionTask(grpc::ServerContext* context,
                                                   const proto::ProvisionTaskRequest* request,
                                                   proto::ProvisionTaskResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  if (replicated_) {
    return ReplicatedRefusal();
  }
  const proto::TaskPolicy& task = request->task();
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<const PolicySet> current = aggregator_->policies();
  if (current->retired(task.task_id())) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("task '", task.task_id(), "' was retired; ids are not reused"));
  }
  absl::StatusOr<PolicySet> next = current->With(task, config_.default_policy());
  if (absl::IsAlreadyExists(next.status())) {
    // A retry with the very same terms changes nothing; other terms are refused.
    if (current->Holds(task, config_.default_policy())) {
      response->set_created(false);
      return grpc::Status::OK;
    }
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("task '", task.task_id(),
                     "' is provisioned with other terms, which are fixed (the budget was promised "
                     "to its devices): retire it and provision a new task id"));
  }
  if (!next.ok()) return ToGrpcStatus(next.status());
  // The listeners' receive limits were sized at start for the largest
  // policy; a task above them could not upload.
  if (next->MaxSentValues() > current->MaxSentValues() ||
      next->MaxDimension() > current->MaxDimension()) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("task '", task.task_id(),
                     "' allows more values than this daemon's listeners were "
                     "sized for (max_sent_values ",
                     current->MaxSentValues(), ", max_dimension ", current->MaxDimension(),
                     "): add it to the config and restart"));
  }
  proto::ProvisionedTasks changed = provisioned_;
  *changed.add_tasks() = task;
  if (absl::Status s = CommitLocked(std::move(changed), *std::move(next)); !s.ok()) {
    return ToGrpcStatus(s);
  }
  TANDEM_LOG(INFO) << "operator provisioned task " << task.task_id() << " (population "
                   << aggregator_->policies()->PopulationOf(task.task_id()) << ")";
  response->set_created(true);
  return grpc::Status::OK;
}

grpc::Status AggregatorAdminService::ListProvisionedTasks(
    grpc::ServerContext* context, const proto::ListProvisionedTasksRequest*,
    proto::ListProvisionedTasksResponse* response) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  const std::shared_ptr<const PolicySet> policies = aggregator_->policies();
  response->set_open(policies->open());
  for (const std::string& id : policies->Tasks()) {
    proto::ProvisionedTask* t = response->add_tasks();
    t->set_task_id(id);
    t->set_population(policies->PopulationOf(id));
    *t->mutable_policy() = ToProto(policies->For(id));
    t->set_origin(Find(config_.task_policies(), id) != nullptr ? "config" : "api");
    t->set_retired(policies->retired(id));
  }
  return grpc::Status::OK;
}

grpc::Status AggregatorAdminService::RetireTask(grpc::ServerContext* context,
                                                const proto::RetireTaskRequest* request,
                                                proto::RetireTaskResponse*) {
  if (grpc::Status s = gate_->Admit(*context); !s.ok()) return s;
  if (replicated_) {
    return ReplicatedRefusal();
  }
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<const PolicySet> current = aggregator_->policies();
  if (current->retired(request->task_id())) return grpc::Status::OK;  // a retry
  absl::StatusOr<PolicySet> next = current->Retired(request->task_id());
  if (!next.ok()) return ToGrpcStatus(next.status());
  proto::ProvisionedTasks changed = provisioned_;
  changed.add_retired(request->task_id());
  if (absl::Status s = CommitLocked(std::move(changed), *std::move(next)); !s.ok()) {
    return ToGrpcStatus(s);
  }
  TANDEM_LOG(INFO) << "operator retired task " << request->task_id();
  return grpc::Status::OK;
}

}  // namespace tandem::aggregator
