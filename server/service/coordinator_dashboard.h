// The coordinator's live dashboard: HTML pages served beside /metrics on the
// metrics port (base/metrics_server.h, --metrics_port):
//   /, /tasks          the live tasks, each linked to its page;
//   /tasks/<task_id>   the task's open round (phase, assigned clients,
//                      uploads done / needed, time to the deadline), inline
//                      SVG line plots of the held-out accuracy and of epsilon
//                      spent (the budget as a horizontal line) over the
//                      released rounds, and the rounds table (round,
//                      accuracy, loss, epsilon, reports accepted, upload
//                      bytes, seconds). An id that is not exactly a live
//                      task's is 404.
// The pages reload themselves every 5 s (<meta http-equiv="refresh">) and
// hold no JavaScript; every string that comes from a task (its id, the
// reason it stopped) is HTML-escaped. The server sends them with
// Cache-Control: no-store and a Content-Security-Policy that allows only
// inline styles.
//
// Privacy: the pages show nothing beyond what /metrics and tandem-status
// already show on the same unauthenticated port and the public status RPC:
// aggregates of released rounds (accuracy, loss, epsilon, reports accepted,
// bytes, seconds) and the open round's counts (assigned, uploads done,
// which /metrics exports as gauges). Never a device or client id, a key, a
// ticket, report data, nor the worker's address or errors.
//
// The renderers are pure functions of plain structs (TaskDashboard), so
// they are tested without daemons; RegisterCoordinatorDashboard reads the
// structs from a TaskHost at each request. Thread safety: every function is
// thread-safe (the renderers touch only their arguments).
#ifndef TANDEM_SERVER_SERVICE_COORDINATOR_DASHBOARD_H_
#define TANDEM_SERVER_SERVICE_COORDINATOR_DASHBOARD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/metrics_server.h"
#include "proto/coordinator.pb.h"
#include "server/core/task_host.h"

namespace tandem::server {

// The newest rounds a task page plots and lists (the coordinator keeps its
// whole history; a page stays bounded).
inline constexpr size_t kDashboardMaxRounds = 1000;

// One completed round as the dashboard draws it.
struct DashboardRound {
  uint64_t round = 0;       // the version it released (an evaluation: evaluated)
  bool evaluation = false;  // a federated evaluation round (no release)
  bool evaluated = true;    // accuracy and loss known (an opaque model is not)
  double accuracy = 0;      // held-out (an evaluation round: the noised federated one)
  double loss = 0;
  double epsilon = 0;  // cumulative after the round
  uint64_t accepted_reports = 0;
  uint64_t bytes_up = 0;
  double seconds = 0;  // opening to release
};

// One task's page.
struct TaskDashboard {
  std::string task_id;
  std::string phase;  // idle, paused, opening, collecting, finalizing, done
  std::string done_reason;
  uint64_t completed_rounds = 0;
  uint64_t total_rounds = 0;
  uint64_t round_id = 0;  // the round under way (completed + 1 until done)
  uint64_t assigned = 0;  // clients assigned in the open round
  uint64_t uploads_done = 0;
  uint32_t min_reports = 0;     // the quorum a round needs
  uint32_t target_reports = 0;  // a round closes early at this many (0: at the deadline)
  // Until the open round's upload deadline (negative: passed); unset when
  // no round is open.
  std::optional<absl::Duration> time_to_deadline;
  double epsilon_spent = 0;
  double epsilon_budget = 0;  // 0: no budget
  // The rounds' privacy parameters and what set them (0: given, not
  // derived; server/core/task_targets.h).
  double noise_multiplier = 0;
  uint32_t log_blocks_per_group = 0;
  double target_epsilon = 0;
  double max_upload_vs_dense = 0;
  double last_accuracy = 0;
  std::vector<DashboardRound> rounds;  // oldest first, the newest kDashboardMaxRounds
};

// What a full status (with its history) says; the options' figures
// (budget, quorum, target) and the deadline are left for the caller.
TaskDashboard DashboardFromStatus(const proto::CoordinatorStatusResponse& status);

// The index: one row per task (their rounds are not used), linked to
// /tasks/<id>.
std::string RenderIndexPage(const std::vector<TaskDashboard>& tasks);
// A task's page. Its plots are <svg id="accuracy-plot"> and
// <svg id="epsilon-plot">, each with one <polyline data-points="N">
// (N = training rounds drawn) and a <circle> with a <title> per point; the
// budget is <line id="epsilon-budget" data-budget="B">. Table rows are
// <tr data-round="R" data-kind="training|evaluation">, newest first.
std::string RenderTaskPage(const TaskDashboard& task);
// The 404 page for `path` (a task that is not live).
std::string RenderNotFoundPage(absl::string_view path);

// Serves the pages above on `server`: "/" and "/tasks" (the index) and
// "/tasks/<id>", read from `tasks` at each request. `tasks` is not owned and
// must outlive the server (the daemon destroys its metrics server first).
void RegisterCoordinatorDashboard(TaskHost* tasks, MetricsServer* server);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_COORDINATOR_DASHBOARD_H_
