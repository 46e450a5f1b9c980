#include "aggregator/service/aggregator_metrics.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "base/metrics_server.h"

namespace tandem::aggregator {
namespace {

// Task ids as the Aggregator accepts them: [A-Za-z0-9._-]{1,64}.
bool ValidTaskId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

const prometheus::Histogram::BucketBoundaries& SecondsBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return *b;
}

}  // namespace

AggregatorMetrics::AggregatorMetrics(Role role, const std::string& state_path, uint32_t max_tasks,
                                     const RefusalCounters* refusals)
    : role_(RoleName(role)),
      max_tasks_(max_tasks),
      refusals_(refusals),
      registry_(std::make_shared<prometheus::Registry>()) {
  const prometheus::Labels role_label = {{"role", role_}};
  uploads_ = &prometheus::BuildCounter()
                  .Name("tandem_aggregator_uploads_total")
                  .Help("Upload calls by status code (OK = stored, pending verification).")
                  .Labels(role_label)
                  .Register(*registry_);
  batches_ = &prometheus::BuildCounter()
                  .Name("tandem_aggregator_verification_batches_total")
                  .Help("Verification exchanges with the peer (leader: sent, helper: answered) "
                        "by status code.")
                  .Labels(role_label)
                  .Register(*registry_);
  batch_reports_ = &prometheus::BuildCounter()
                        .Name("tandem_aggregator_verification_reports_total")
                        .Help("Reports in the verification batches.")
                        .Labels(role_label)
                        .Register(*registry_)
                        .Add({});
  auto& seconds = prometheus::BuildHistogram()
                      .Name("tandem_aggregator_verification_batch_seconds")
                      .Help("Seconds per verification batch: local = this server's share "
                            "expansion, digests, proof shares and commit; peer = the leader's "
                            "wait on the helper.")
                      .Labels(role_label)
                      .Register(*registry_);
  local_seconds_ = &seconds.Add({{"part", "local"}}, SecondsBuckets());
  peer_seconds_ = &seconds.Add({{"part", "peer"}}, SecondsBuckets());
  // Tasks this server already holds state for (sqlite_store_factory.h names).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_path, ec)) {
    const std::string file = entry.path().filename().string();
    absl::string_view name = file;
    if (!absl::ConsumePrefix(&name, "task-")) continue;
    if (absl::ConsumeSuffix(&name, ".sqlite") || absl::ConsumeSuffix(&name, ".segments")) {
      NoteTask(std::string(name));
    }
  }
}

void AggregatorMetrics::CountUpload(absl::StatusCode code) {
  uploads_->Add({{"code", absl::StatusCodeToString(code)}}).Increment();
}

void AggregatorMetrics::CountVerifyBatch(absl::StatusCode code, int reports) {
  batches_->Add({{"code", absl::StatusCodeToString(code)}}).Increment();
  if (code == absl::StatusCode::kOk && reports > 0) batch_reports_->Increment(reports);
}

void AggregatorMetrics::ObserveBatchSeconds(bool local, absl::Duration time) {
  (local ? local_seconds_ : peer_seconds_)->Observe(absl::ToDoubleSeconds(time));
}

void AggregatorMetrics::NoteTask(const std::string& task_id) {
  if (!ValidTaskId(task_id)) return;
  absl::MutexLock lock(&mu_);
  if (tasks_.size() >= max_tasks_ && !tasks_.count(task_id)) return;
  tasks_.insert(task_id);
}

std::set<std::string> AggregatorMetrics::KnownTasks() const {
  absl::MutexLock lock(&mu_);
  return tasks_;
}

std::shared_ptr<prometheus::Collectable> AggregatorMetrics::StatusCollectable(
    Aggregator* aggregator, const StallReporter* stall) const {
  return std::make_shared<CallbackCollectable>([this, aggregator, stall] {
    const std::set<std::string> tasks = KnownTasks();
    MetricFamilies out;
    MetricFamilies::Family reports = out.Gauge(
        "tandem_aggregator_reports", "Reports of the task's latest round in the store, by state.");
    MetricFamilies::Family open = out.Gauge("tandem_aggregator_open_round",
                                            "The task's open round (0 = none).");
    MetricFamilies::Family released = out.Gauge("tandem_aggregator_released_rounds",
                                                "Rounds of the task this server released.");
    MetricFamilies::Family spent = out.Gauge(
        "tandem_aggregator_epsilon_spent",
        "This server's own epsilon spent on the task at its delta (its policy, its noise).");
    MetricFamilies::Family budget = out.Gauge("tandem_aggregator_epsilon_budget",
                                              "This server's epsilon budget for the task.");
    MetricFamilies::Family expansions = out.Counter(
        "tandem_aggregator_expansions_total",
        "Key-share expansions since the task loaded, by kind: share (added into an "
        "aggregate, one per report), undo (taken back out: not counted), check (a report "
        "asked about again).");
    MetricFamilies::Family expansion_seconds = out.Counter(
        "tandem_aggregator_expansion_seconds_total",
        "Seconds spent expanding key shares for the task since it loaded.");
    for (const std::string& task : tasks) {
      proto::AggregatorStatusRequest request;
      request.set_task_id(task);
      absl::StatusOr<proto::AggregatorStatusResponse> s = aggregator->Status(request);
      if (!s.ok()) continue;  // e.g. NOT_FOUND: named but never opened here
      const std::vector<std::pair<std::string, std::string>> labels = {{"role", role_},
                                                                       {"task", task}};
      auto with_state = [&](const char* state) {
        auto l = labels;
        l.emplace_back("state", state);
        return l;
      };
      reports.Add(with_state("pending"), static_cast<double>(s->pending_reports()))
          .Add(with_state("accepted"), static_cast<double>(s->accepted_reports()))
          .Add(with_state("rejected"), static_cast<double>(s->rejected_reports()));
      open.Add(labels, static_cast<double>(s->open_round()));
      released.Add(labels, static_cast<double>(s->released_rounds()));
      spent.Add(labels, s->epsilon_spent());
      budget.Add(labels, s->epsilon_budget());
      auto with_kind = [&](const char* kind) {
        auto l = labels;
        l.emplace_back("kind", kind);
        return l;
      };
      expansions.Add(with_kind("share"), static_cast<double>(s->share_expansions()))
          .Add(with_kind("undo"), static_cast<double>(s->undo_expansions()))
          .Add(with_kind("check"), static_cast<double>(s->check_evaluations()));
      expansion_seconds.Add(labels, s->expansion_seconds());
    }
    MetricFamilies::Family refused = out.Counter(
        "tandem_aggregator_refused_calls_total", "Calls refused since start, by listener/reason.");
    for (const auto& [reason, n] : refusals_->Snapshot()) {
      refused.Add({{"role", role_}, {"reason", reason}}, static_cast<double>(n));
    }
    if (stall != nullptr) {
      out.Gauge("tandem_aggregator_verification_stalled_seconds",
                "Seconds the leader's verification passes have been failing (0: they "
                "succeed); the reason is logged.")
          .Add({{"role", role_}}, stall->stalled_seconds(absl::Now()));
    }
    return out.Take();
  });
}

absl::StatusOr<proto::VerifyResponse> MeteredPeerChannel::Verify(
    const proto::VerifyRequest& request) {
  const absl::Time start = absl::Now();
  absl::StatusOr<proto::VerifyResponse> response = inner_->Verify(request);
  const absl::Duration took = absl::Now() - start;
  metrics_->CountVerifyBatch(response.status().code(), request.checks_size());
  metrics_->ObserveBatchSeconds(/*local=*/false, took);
  absl::MutexLock lock(&mu_);
  pass_.peer_time += took;
  ++pass_.batches;
  return response;
}

absl::StatusOr<proto::AcceptedSetAck> MeteredPeerChannel::CommitAcceptedSet(
    const proto::AcceptedSet& request) {
  const absl::Time start = absl::Now();
  absl::StatusOr<proto::AcceptedSetAck> ack = inner_->CommitAcceptedSet(request);
  const absl::Duration took = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  pass_.peer_time += took;
  return ack;
}

MeteredPeerChannel::Pass MeteredPeerChannel::TakePass() {
  absl::MutexLock lock(&mu_);
  Pass p = pass_;
  pass_ = Pass{};
  return p;
}

}  // namespace tandem::aggregator
