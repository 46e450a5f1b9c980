// An aggregator's operator API (proto/aggregator_admin.proto; issue 33
// item 2): the aggregator's own operator provisions, lists and retires the
// tasks it opens rounds for, with their privacy terms, without a restart.
//
// Durability: every change is written to state_path/provisioned.textproto
// (whole, atomically, fsynced) before it takes effect or is acknowledged;
// the daemon adds that file's tasks to its config's at every start
// (PoliciesWithProvisioned), so a SIGKILL loses no acknowledged change.
// A provisioned task's terms are fixed: changing them would let a budget
// grow after devices were promised it; retire the task and provision a new
// id. Retiring keeps the task's spending in its population's ledger.
// Replicated aggregators (PostgreSQL) refuse changes here: their replicas
// share their tasks through their config.
//
// Thread safety: the handlers may run concurrently; changes are serialized
// by an internal mutex. Not owned: the aggregator and the gate, which
// outlive the service.
#ifndef TANDEM_AGGREGATOR_SERVICE_ADMIN_SERVICE_H_
#define TANDEM_AGGREGATOR_SERVICE_ADMIN_SERVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/policy.h"
#include "base/grpc_caller_gate.h"
#include "proto/aggregator_admin.grpc.pb.h"
#include "proto/config.pb.h"

namespace tandem::aggregator {

// state_path/provisioned.textproto.
std::string ProvisionedTasksPath(const std::string& state_path);

// The file's tasks (an absent file: none). INVALID_ARGUMENT when it does not
// parse; PERMISSION_DENIED when it cannot be read.
absl::StatusOr<proto::ProvisionedTasks> ReadProvisionedTasks(const std::string& path);

// The config's tasks, then the provisioned ones (a task in both with the
// same terms counts once; with other terms: INVALID_ARGUMENT naming it),
// then the retired ones taken out of service. Errors as
// PolicySet::FromConfig.
absl::StatusOr<PolicySet> PoliciesWithProvisioned(const proto::AggregatorConfig& config,
                                                  const proto::ProvisionedTasks& provisioned);

class AggregatorAdminService final : public proto::AggregatorAdmin::Service {
 public:
  // `config`: the daemon's (its default_policy resolves new tasks' terms,
  // its task_policies are listed as origin "config"); `provisioned`: what
  // ReadProvisionedTasks returned at start.
  AggregatorAdminService(Aggregator* aggregator, const CallerGate* gate,
                         proto::AggregatorConfig config, proto::ProvisionedTasks provisioned);

  grpc::Status ProvisionTask(grpc::ServerContext* context,
                             const proto::ProvisionTaskRequest* request,
                             proto::ProvisionTaskResponse* response) override;
  grpc::Status ListProvisionedTasks(grpc::ServerContext* context,
                                    const proto::ListProvisionedTasksRequest* request,
                                    proto::ListProvisionedTasksResponse* response) override;
  grpc::Status RetireTask(grpc::ServerContext* context, const proto::RetireTaskRequest* request,
                          proto::RetireTaskResponse* response) override;

 private:
  // Writes `next` durably, then swaps `policies` in.
  absl::Status CommitLocked(proto::ProvisionedTasks next, PolicySet policies)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Aggregator* const aggregator_;
  const CallerGate* const gate_;
  const proto::AggregatorConfig config_;
  const bool replicated_;
  absl::Mutex mu_;
  proto::ProvisionedTasks provisioned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_SERVICE_ADMIN_SERVICE_H_
