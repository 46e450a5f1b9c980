// The live dashboard: the renderers on hand-made structs (plots, table,
// escaping, bounds), and the pages served from a TaskHost with a real
// Coordinator (scripted aggregators, fake clock) on a real MetricsServer.
#include "server/service/coordinator_dashboard.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/testing/http_get.h"
#include "server/core/coordinator_test_fixture.h"

namespace tandem::server {
namespace {

using ::tandem::testing::Between;
using ::tandem::testing::Count;
using ::tandem::testing::HttpGet;

// The (x, y) pairs of the first polyline of the svg `id`.
std::vector<std::pair<double, double>> Points(const std::string& page, const std::string& id) {
  const std::string svg = Between(page, "<svg id=\"" + id + "\"", "</svg>");
  std::vector<std::pair<double, double>> out;
  for (absl::string_view xy :
       absl::StrSplit(Between(svg, " points=\"", "\""), ' ', absl::SkipEmpty())) {
    std::vector<std::string> c = absl::StrSplit(xy, ',');
    double x = 0, y = 0;
    if (c.size() == 2 && absl::SimpleAtod(c[0], &x) && absl::SimpleAtod(c[1], &y)) {
      out.push_back({x, y});
    }
  }
  return out;
}

// Whether some tag has an on...= attribute (an event handler).
bool HasEventHandler(const std::string& page) {
  for (size_t at = page.find(" on"); at != std::string::npos; at = page.find(" on", at + 1)) {
    size_t i = at + 3;
    while (i < page.size() && std::isalpha(static_cast<unsigned char>(page[i]))) ++i;
    if (i > at + 3 && i < page.size() && page[i] == '=') return true;
  }
  return false;
}

TaskDashboard ThreeRounds() {
  TaskDashboard t;
  t.task_id = "digits";
  t.phase = "collecting";
  t.completed_rounds = 3;
  t.total_rounds = 5;
  t.round_id = 4;
  t.assigned = 7;
  t.uploads_done = 2;
  t.min_reports = 5;
  t.target_reports = 6;
  t.time_to_deadline = absl::Seconds(12);
  t.epsilon_budget = 8;
  t.epsilon_spent = 3.5;
  t.noise_multiplier = 1;
  t.log_blocks_per_group = 1;
  const double acc[] = {0.5, 0.7, 0.8};
  for (int i = 0; i < 3; ++i) {
    DashboardRound r;
    r.round = i + 1;
    r.accuracy = acc[i];
    r.loss = 1.5 - 0.25 * i;
    r.epsilon = 1.0 + i;
    r.accepted_reports = 10 + i;
    r.bytes_up = 2048 * (i + 1);
    r.seconds = 4.5;
    t.rounds.push_back(r);
  }
  // A federated evaluation of version 3 (not plotted, listed).
  DashboardRound e = t.rounds.back();
  e.evaluation = true;
  e.epsilon = 3.5;
  e.accuracy = 0.75;
  t.rounds.push_back(e);
  return t;
}

TEST(CoordinatorDashboard, TaskPageHasPlotsTableAndProgress) {
  const std::string page = RenderTaskPage(ThreeRounds());
  EXPECT_NE(page.find("<meta http-equiv=\"refresh\" content=\"5\">"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("javascript:"), std::string::npos);
  EXPECT_FALSE(HasEventHandler(page));

  // One point per released round in both plots (the evaluation round is
  // only in the table), left to right.
  const std::string accuracy = Between(page, "<svg id=\"accuracy-plot\"", "</svg>");
  const std::string epsilon = Between(page, "<svg id=\"epsilon-plot\"", "</svg>");
  ASSERT_FALSE(accuracy.empty());
  ASSERT_FALSE(epsilon.empty());
  EXPECT_NE(accuracy.find("<polyline class=\"series\" data-points=\"3\""), std::string::npos);
  EXPECT_NE(epsilon.find("<polyline class=\"series\" data-points=\"3\""), std::string::npos);
  EXPECT_EQ(Count(accuracy, "<circle "), 3u);
  EXPECT_NE(accuracy.find("<title>round 2: accuracy 0.7000</title>"), std::string::npos);
  EXPECT_NE(epsilon.find("<title>round 3: epsilon 3.000</title>"), std::string::npos);
  EXPECT_NE(accuracy.find(">round 3: 0.8000</text>"), std::string::npos);  // the latest
  const auto a = Points(page, "accuracy-plot");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_LT(a[0].first, a[1].first);
  EXPECT_LT(a[1].first, a[2].first);
  EXPECT_GT(a[0].second, a[1].second);  // higher accuracy is drawn higher (smaller y)
  EXPECT_GT(a[1].second, a[2].second);
  // The budget is a horizontal line above every epsilon point.
  EXPECT_NE(epsilon.find("id=\"epsilon-budget\" data-budget=\"8.000\""), std::string::npos);
  const std::string budget_y = Between(epsilon, "id=\"epsilon-budget\"", "stroke=");
  double y1 = 0;
  ASSERT_TRUE(absl::SimpleAtod(Between(budget_y, "y1=\"", "\""), &y1)) << budget_y;
  EXPECT_EQ(Between(budget_y, "y1=\"", "\""), Between(budget_y, "y2=\"", "\""));
  for (const auto& [x, y] : Points(page, "epsilon-plot")) EXPECT_GT(y, y1);
  EXPECT_EQ(accuracy.find("budget"), std::string::npos);

  // Table: newest first, the evaluation round marked.
  const std::string table = Between(page, "<table id=\"rounds\">", "</table>");
  EXPECT_EQ(Count(table, "<tr data-round="), 4u);
  const size_t eval = table.find("<tr data-round=\"3\" data-kind=\"evaluation\">");
  const size_t r3 = table.find("<tr data-round=\"3\" data-kind=\"training\">");
  const size_t r1 = table.find("<tr data-round=\"1\" data-kind=\"training\">");
  ASSERT_NE(eval, std::string::npos);
  EXPECT_LT(eval, r3);
  EXPECT_LT(r3, r1);
  const std::string row1 = Between(table, "<tr data-round=\"1\" data-kind=\"training\">", "</tr>");
  EXPECT_EQ(row1,
            "<td>1</td><td>0.5000</td><td>1.5000</td><td>1.000</td><td>10</td>"
            "<td title=\"2048 bytes\">2.0 KiB</td><td>4.5</td>");

  // The open round.
  EXPECT_NE(page.find("<dd id=\"phase\">collecting</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"assigned\">7</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"uploads\">2 done / 5 needed, closes early at 6</dd>"),
            std::string::npos);
  EXPECT_NE(page.find("<dd id=\"deadline\">in 12 s</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"epsilon\">3.500 of budget 8.000</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"completed\">3 of 5</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"privacy\">z 1.000 per aggregator, d = 1</dd>"), std::string::npos);
  // Parameters set from the task's targets say so.
  TaskDashboard planned = ThreeRounds();
  planned.noise_multiplier = 0.6682;
  planned.log_blocks_per_group = 3;
  planned.target_epsilon = 2.55;
  planned.max_upload_vs_dense = 1;
  EXPECT_NE(RenderTaskPage(planned).find("<dd id=\"privacy\">z 0.668 per aggregator (for epsilon "
                                         "2.550), d = 3 (within 1.00x dense sharing)</dd>"),
            std::string::npos);
}

TEST(CoordinatorDashboard, AnEmptyTaskDrawsEmptyPlotsAndUnknownLosses) {
  TaskDashboard t;
  t.task_id = "new";
  t.phase = "idle";
  std::string page = RenderTaskPage(t);
  EXPECT_EQ(Count(page, "data-points=\"0\" "), 2u);
  EXPECT_EQ(Count(page, "no round released yet"), 2u);
  EXPECT_EQ(page.find("epsilon-budget"), std::string::npos);  // no budget, no line
  EXPECT_NE(page.find("<dd id=\"deadline\">no round open</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"epsilon\">0.000 (no budget)</dd>"), std::string::npos);

  // An opaque model's rounds: epsilon plotted, accuracy and loss unknown.
  DashboardRound r;
  r.round = 1;
  r.evaluated = false;
  r.epsilon = 0.5;
  t.rounds.push_back(r);
  page = RenderTaskPage(t);
  EXPECT_NE(Between(page, "<svg id=\"accuracy-plot\"", "</svg>").find("data-points=\"0\""),
            std::string::npos);
  EXPECT_NE(Between(page, "<svg id=\"epsilon-plot\"", "</svg>").find("data-points=\"1\""),
            std::string::npos);
  EXPECT_NE(page.find("<td>1</td><td><span class=\"muted\">&mdash;</span></td>"),
            std::string::npos);
}

TEST(CoordinatorDashboard, StringsFromTasksAreEscaped) {
  TaskDashboard t = ThreeRounds();
  t.task_id = "<script>alert(1)</script>";
  t.phase = "done\"><b>";
  t.done_reason = "refused: <img src=x onerror=alert(1)>";
  const std::string page = RenderTaskPage(t);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"done-reason\">refused: &lt;img src=x onerror=alert(1)&gt;</dd>"),
            std::string::npos);
  const std::string index = RenderIndexPage({t});
  EXPECT_EQ(index.find("<script"), std::string::npos);
  EXPECT_NE(index.find("href=\"/tasks/%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""),
            std::string::npos)
      << index;
  EXPECT_EQ(RenderNotFoundPage("/tasks/<x>").find("<x>"), std::string::npos);
}

TEST(CoordinatorDashboard, IndexLinksEveryTask) {
  TaskDashboard a = ThreeRounds();
  TaskDashboard b;
  b.task_id = "fmnist.v2";
  b.phase = "paused";
  const std::string page = RenderIndexPage({a, b});
  EXPECT_NE(page.find("<meta http-equiv=\"refresh\" content=\"5\">"), std::string::npos);
  EXPECT_NE(page.find("<a href=\"/tasks/digits\">digits</a>"), std::string::npos);
  EXPECT_NE(page.find("<a href=\"/tasks/fmnist.v2\">fmnist.v2</a>"), std::string::npos);
  EXPECT_EQ(Count(page, "<tr data-task="), 2u);
  EXPECT_NE(RenderIndexPage({}).find("no live task"), std::string::npos);
}

TEST(CoordinatorDashboard, StatusHistoryIsMappedAndBounded) {
  proto::CoordinatorStatusResponse s;
  s.set_task_id("t");
  s.set_phase("done");
  s.set_done_reason("rounds done");
  s.set_completed_rounds(kDashboardMaxRounds + 5);
  for (uint64_t v = 1; v <= kDashboardMaxRounds + 5; ++v) {
    proto::RoundSummary* r = s.add_history();
    r->set_model_version(v);
    r->set_accuracy(0.5);
    r->set_epsilon(0.01 * static_cast<double>(v));
    r->set_accepted_reports(3);
    r->set_evaluated_by(v == 7 ? "none" : "coordinator");
  }
  s.mutable_history(9)->mutable_evaluation()->set_model_version(10);
  const TaskDashboard d = DashboardFromStatus(s);
  EXPECT_EQ(d.task_id, "t");
  EXPECT_EQ(d.done_reason, "rounds done");
  ASSERT_EQ(d.rounds.size(), kDashboardMaxRounds);  // the newest ones
  EXPECT_EQ(d.rounds.front().round, 6u);
  EXPECT_EQ(d.rounds.back().round, kDashboardMaxRounds + 5);
  EXPECT_FALSE(d.rounds[1].evaluated);  // version 7: not evaluated
  EXPECT_TRUE(d.rounds[4].evaluation);  // history(9)
  EXPECT_DOUBLE_EQ(d.rounds.back().epsilon, 0.01 * (kDashboardMaxRounds + 5));
  // Plotted: the training rounds (not the evaluation), accuracy where known.
  const std::string page = RenderTaskPage(d);
  EXPECT_NE(Between(page, "<svg id=\"accuracy-plot\"", "</svg>").find("data-points=\"998\""),
            std::string::npos);
  EXPECT_NE(Between(page, "<svg id=\"epsilon-plot\"", "</svg>").find("data-points=\"999\""),
            std::string::npos);
  EXPECT_EQ(Count(page, "<tr data-round="), kDashboardMaxRounds);
}

// The pages as the daemon serves them: a TaskHost with a real coordinator.
class DashboardServerTest : public CoordinatorTest {};

TEST_F(DashboardServerTest, ServesTheLiveTasksAndOnlyThem) {
  CoordinatorOptions o = Options();
  o.task.epsilon_budget = 1000;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make(o));
  Coordinator* coordinator = c.get();
  TaskHostOptions ho;
  ho.devices = devices_.get();
  ho.clock = &clock_;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, TaskHost::Create(std::move(ho)));
  TaskParts parts;
  parts.coordinator = std::move(c);
  TANDEM_ASSERT_OK(host->Adopt(std::move(parts), proto::TaskSpec()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0"));
  RegisterCoordinatorDashboard(host.get(), server.get());

  const std::string index = HttpGet(server->port(), "/");
  EXPECT_NE(index.find("200 OK"), std::string::npos) << index;
  EXPECT_NE(index.find("<a href=\"/tasks/t1\">t1</a>"), std::string::npos) << index;
  EXPECT_NE(HttpGet(server->port(), "/tasks").find("<a href=\"/tasks/t1\">"), std::string::npos);
  for (const char* wrong : {"/tasks/t", "/tasks/t1x", "/tasks/T1", "/tasks/t1/", "/tasks/t1/x"}) {
    const std::string r = HttpGet(server->port(), wrong);
    EXPECT_NE(r.find("404 Not Found"), std::string::npos) << wrong << ": " << r;
    EXPECT_NE(r.find("Content-Type: text/html"), std::string::npos) << r;
  }
  std::string page = HttpGet(server->port(), "/tasks/t1");
  ASSERT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("Cache-Control: no-store"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"phase\">idle</dd>"), std::string::npos);
  EXPECT_EQ(Count(page, "data-points=\"0\" "), 2u);

  // The open round: its deadline on the coordinator's clock, its counts.
  TickUntil(*coordinator, "collecting");
  EXPECT_EQ(coordinator->TimeToDeadline(), absl::Seconds(10));
  TANDEM_ASSERT_OK(CheckIn(*coordinator, In("a")).status());
  TANDEM_ASSERT_OK(CheckIn(*coordinator, In("b")).status());
  TANDEM_ASSERT_OK(coordinator->UploadDone(Done("a", 1)));
  clock_.Advance(absl::Seconds(4));
  page = HttpGet(server->port(), "/tasks/t1");
  EXPECT_NE(page.find("<dd id=\"phase\">collecting</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"assigned\">2</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"uploads\">1 done / 2 needed</dd>"), std::string::npos);
  EXPECT_NE(page.find("<dd id=\"deadline\">in 6 s</dd>"), std::string::npos);

  // Released: one point in each plot, one table row, the budget drawn.
  TANDEM_ASSERT_OK(coordinator->UploadDone(Done("b", 1)));
  clock_.Advance(absl::Seconds(7));
  leader_.accepted = helper_.accepted = 2;
  TANDEM_ASSERT_OK(coordinator->Tick());
  ASSERT_EQ(coordinator->Status().completed_rounds(), 1u);
  page = HttpGet(server->port(), "/tasks/t1");
  EXPECT_NE(Between(page, "<svg id=\"accuracy-plot\"", "</svg>").find("data-points=\"1\""),
            std::string::npos);
  EXPECT_NE(Between(page, "<svg id=\"epsilon-plot\"", "</svg>").find("data-points=\"1\""),
            std::string::npos);
  EXPECT_NE(page.find("data-budget=\"1000.000\""), std::string::npos);
  EXPECT_EQ(Count(page, "<tr data-round="), 1u);
  EXPECT_NE(page.find("<tr data-round=\"1\" data-kind=\"training\"><td>1</td>"), std::string::npos);
  EXPECT_EQ(coordinator->TimeToDeadline(), std::nullopt);
}

}  // namespace
}  // namespace tandem::server
