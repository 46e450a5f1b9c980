#include "server/service/coordinator_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "base/metrics_server.h"

namespace tandem::server {
namespace {

// One task's series (label task).
void AddTask(const CoordinatorMetrics& m, MetricFamilies* out) {
  const proto::CoordinatorStatusResponse& s = m.status;
  const std::string& task = s.task_id();
  auto gauge = [&](const char* name, const char* help, double v) {
    out->Gauge(name, help).Add({{"task", task}}, v);
  };
  gauge("tandem_coordinator_completed_rounds", "Rounds released.",
        static_cast<double>(s.completed_rounds()));
  gauge("tandem_coordinator_total_rounds", "Rounds the task runs.",
        static_cast<double>(s.total_rounds()));
  gauge("tandem_coordinator_aggregation_round", "Round id on the aggregators.",
        static_cast<double>(s.aggregation_round()));
  gauge("tandem_coordinator_assigned_clients", "Clients assigned in the open round.",
        static_cast<double>(s.assigned()));
  gauge("tandem_coordinator_uploads_done", "Uploads reported in the open round.",
        static_cast<double>(s.uploads_done()));
  gauge("tandem_coordinator_epsilon_spent", "Privacy spent at the task's delta.",
        s.epsilon_spent());
  gauge("tandem_coordinator_last_accuracy", "Held-out accuracy after the last round.",
        s.last_accuracy());
  gauge("tandem_coordinator_store_stalled_seconds",
        "How long the coordinator's store writes have been failing (0: they succeed).",
        m.store_stalled_seconds);
  gauge("tandem_coordinator_last_round_accepted_reports",
        "Reports both aggregators counted in the last released round.",
        static_cast<double>(m.last_round_accepted_reports));
  MetricFamilies::Family phase =
      out->Gauge("tandem_coordinator_phase", "Round phase (1 = current).");
  for (const char* p : {"idle", "paused", "opening", "collecting", "finalizing", "done"}) {
    phase.Add({{"task", task}, {"phase", p}}, s.phase() == p ? 1 : 0);
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out->Counter(name, help).Add({{"task", task}}, static_cast<double>(v));
  };
  counter("tandem_coordinator_rounds_abandoned_total", "Rounds closed without release.",
          m.rounds_abandoned);
  counter("tandem_coordinator_upload_bytes_total", "Bytes clients reported uploading.",
          m.upload_bytes);
  counter("tandem_coordinator_download_bytes_total", "Model bytes streamed to clients.",
          m.download_bytes);
  counter("tandem_coordinator_unauthenticated_upload_done_total",
          "UploadDone calls refused for a missing or wrong upload ticket.",
          m.unauthenticated_upload_done);
  MetricFamilies::Family skew = out->Gauge(
      "tandem_coordinator_aggregator_clock_offset_seconds",
      "Each aggregator's clock minus this coordinator's, measured at its last OpenRound.");
  for (const auto& [role, ms] : s.aggregator_clock_offset_ms()) {
    skew.Add({{"task", task}, {"aggregator", role}}, static_cast<double>(ms) / 1000.0);
  }
  MetricFamilies::Family checkins =
      out->Counter("tandem_coordinator_checkins_total", "Check-ins by outcome.");
  for (const auto& [outcome, n] : m.checkins) {
    checkins.Add({{"task", task}, {"outcome", outcome}}, static_cast<double>(n));
  }
}

}  // namespace

std::shared_ptr<prometheus::Collectable> MakeCoordinatorCollectable(TaskHost* tasks) {
  return std::make_shared<CallbackCollectable>([tasks] {
    MetricFamilies out;
    const std::vector<std::shared_ptr<Coordinator>> live = tasks->Coordinators();
    out.Gauge("tandem_coordinator_tasks", "Tasks running (not deleted).")
        .Add({}, static_cast<double>(live.size()));
    for (const std::shared_ptr<Coordinator>& c : live) AddTask(c->Metrics(), &out);
    DeviceRegistry& devices = tasks->devices();
    const std::map<std::string, uint64_t> refusals = devices.Refusals();
    // Refused check-ins (a Sybil or impersonation flood shows here):
    // reasons "proof", "replay", "not_enrolled", "revoked", "token", "rate",
    // "address_rate" (the service's per-address limit).
    MetricFamilies::Family refused = out.Counter("tandem_coordinator_checkins_refused_total",
                                                 "Check-ins refused before any state, by reason.");
    for (const char* reason :
         {"proof", "replay", "not_enrolled", "revoked", "token", "rate", "address_rate"}) {
      auto it = refusals.find(reason);
      refused.Add({{"reason", reason}}, static_cast<double>(it == refusals.end() ? 0 : it->second));
    }
    uint64_t enrolled = 0;
    for (const proto::DeviceRecord& d : devices.List()) enrolled += d.state() == "enrolled" ? 1 : 0;
    out.Gauge("tandem_coordinator_enrolled_devices", "Devices enrolled and not revoked.")
        .Add({}, static_cast<double>(enrolled));
    return out.Take();
  });
}

}  // namespace tandem::server
