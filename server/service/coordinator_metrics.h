// The coordinator's Prometheus series, one set per live task (label task),
// read from each task's Coordinator::Metrics() at each scrape of its /metrics endpoint
// (base/metrics_server.h):
//   gauges   tandem_coordinator_{completed_rounds, aggregation_round,
//            assigned_clients, uploads_done, epsilon_spent, last_accuracy,
//            last_round_accepted_reports, total_rounds}{task},
//            tandem_coordinator_phase{task, phase} (1 = current)
//   counters tandem_coordinator_{rounds_abandoned, upload_bytes,
//            download_bytes, unauthenticated_upload_done}_total{task},
//            tandem_coordinator_checkins_total{task, outcome}
//   and, for the whole process, tandem_coordinator_tasks (live tasks),
//   tandem_coordinator_checkins_refused_total{reason},
//   tandem_coordinator_enrolled_devices.
// Ownership: `tasks` is not owned and must outlive the collectable
// (the daemon destroys its metrics server first). Thread-safe.
#ifndef TANDEM_SERVER_SERVICE_COORDINATOR_METRICS_H_
#define TANDEM_SERVER_SERVICE_COORDINATOR_METRICS_H_

#include <prometheus/collectable.h>

#include <memory>

#include "server/core/task_host.h"

namespace tandem::server {

std::shared_ptr<prometheus::Collectable> MakeCoordinatorCollectable(TaskHost* tasks);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_COORDINATOR_METRICS_H_
