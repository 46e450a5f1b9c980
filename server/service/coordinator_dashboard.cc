#include "server/service/coordinator_dashboard.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/html.h"

namespace tandem::server {
namespace {

constexpr char kHtml[] = "text/html; charset=utf-8";

// The plots' colours; the line colours are used nowhere else on the page
// (tests find the lines in a screenshot by them).
constexpr char kAccuracyColour[] = "#1565c0";
constexpr char kEpsilonColour[] = "#c62828";
constexpr char kBudgetColour[] = "#ef6c00";

// A plot's geometry (pixels).
constexpr int kWidth = 560;
constexpr int kHeight = 260;
constexpr int kLeft = 56;
constexpr int kRight = 20;
constexpr int kTop = 34;
constexpr int kBottom = 40;

constexpr char kStyle[] =
    "body{font-family:sans-serif;margin:16px 24px;color:#222;background:#fff}"
    "h1{font-size:22px;margin:0 0 10px}h2{font-size:17px;margin:18px 0 8px}"
    "nav{font-size:14px;margin-bottom:8px}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:3px 16px;margin:0}"
    "dt{font-weight:bold}dd{margin:0}"
    ".plots{display:flex;flex-wrap:wrap;gap:16px;margin-top:14px}"
    ".plot{border:1px solid #ddd;background:#fff}"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums}"
    "caption{text-align:left;color:#666;padding-bottom:4px}"
    "th,td{border-bottom:1px solid #ddd;padding:3px 10px;text-align:right}"
    "th:first-child,td:first-child{text-align:left}.muted{color:#777}";

// `v` with `decimals` decimals; "inf" / "n/a" when not finite.
std::string Fixed(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.*f", decimals, v);
}

std::string Bytes(uint64_t n) {
  if (n < 1024) return absl::StrCat(n, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

// A path segment: unreserved characters kept, the rest %-encoded.
std::string UrlSegment(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

std::string Head(absl::string_view title) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"5\">"
      "<meta name=\"viewport\" content=\"width=device-width\">"
      "<title>",
      HtmlEscape(title), "</title><style>", kStyle, "</style></head><body>\n");
}

constexpr char kFoot[] = "</body></html>\n";

// One line plot of (round, value) over 0..y_max, with a point marker (and
// its <title>) per value and, when set, the budget as a dashed line.
struct Plot {
  const char* name;  // the svg is "<name>-plot", its budget line "<name>-budget"
  const char* title;
  const char* colour;
  int tick_decimals;
  int value_decimals;
  double y_max;
  std::optional<double> budget;
  std::vector<std::pair<uint64_t, double>> points;  // rounds ascending
};

std::string RenderPlot(const Plot& p) {
  const double pw = kWidth - kLeft - kRight;
  const double ph = kHeight - kTop - kBottom;
  const uint64_t first = p.points.empty() ? 0 : p.points.front().first;
  const uint64_t last = p.points.empty() ? 0 : p.points.back().first;
  auto x = [&](uint64_t r) {
    if (last == first) return kLeft + pw / 2;
    return kLeft + pw * static_cast<double>(r - first) / static_cast<double>(last - first);
  };
  auto y = [&](double v) {
    if (std::isnan(v)) v = 0;
    v = std::clamp(v, 0.0, p.y_max);
    return kTop + ph - ph * v / p.y_max;
  };
  const std::string id = absl::StrCat(p.name, "-plot");
  std::string out = absl::StrFormat(
      "<svg id=\"%s\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
      "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-labelledby=\"%s-title\">"
      "<title id=\"%s-title\">%s</title>"
      "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">%s</text>",
      id, kWidth, kHeight, kWidth, kHeight, id, id, p.title, kLeft, p.title);
  // Grid and value ticks.
  for (int i = 0; i <= 4; ++i) {
    const double v = p.y_max * i / 4;
    absl::StrAppendFormat(&out,
                          "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
                          "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" "
                          "fill=\"#555\">%s</text>",
                          kLeft, kWidth - kRight, y(v), y(v), i == 0 ? "#888" : "#e4e4e4",
                          kLeft - 6, y(v) + 4, Fixed(v, p.tick_decimals));
  }
  absl::StrAppendFormat(&out, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.1f\" stroke=\"#888\"/>",
                        kLeft, kLeft, kTop, kTop + ph);
  // Round ticks: the first, the last and one between.
  std::vector<uint64_t> ticks;
  if (!p.points.empty()) {
    ticks = {first};
    if (last - first >= 2) ticks.push_back(first + (last - first) / 2);
    if (last != first) ticks.push_back(last);
  }
  for (uint64_t r : ticks) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" "
                          "fill=\"#555\">%d</text>",
                          x(r), kTop + ph + 15, r);
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" "
                        "fill=\"#555\">round</text>",
                        kLeft + pw / 2, kHeight - 6);
  if (p.budget.has_value()) {
    const std::string b = Fixed(*p.budget, p.value_decimals);
    absl::StrAppendFormat(
        &out,
        "<line id=\"%s-budget\" data-budget=\"%s\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 4\"><title>budget %s</title>"
        "</line><text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" "
        "fill=\"%s\">budget %s</text>",
        p.name, b, kLeft, kWidth - kRight, y(*p.budget), y(*p.budget), kBudgetColour, b,
        kWidth - kRight - 2, y(*p.budget) - 5, kBudgetColour, b);
  }
  std::string coords;
  for (const auto& [r, v] : p.points) {
    absl::StrAppendFormat(&coords, "%s%.1f,%.1f", coords.empty() ? "" : " ", x(r), y(v));
  }
  absl::StrAppendFormat(&out,
                        "<polyline class=\"series\" data-points=\"%d\" fill=\"none\" "
                        "stroke=\"%s\" stroke-width=\"3\" stroke-linejoin=\"round\" "
                        "points=\"%s\"/>",
                        p.points.size(), p.colour, coords);
  for (const auto& [r, v] : p.points) {
    absl::StrAppendFormat(&out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" data-round=\"%d\" "
                          "data-value=\"%s\"><title>round %d: %s %s</title></circle>",
                          x(r), y(v), p.colour, r, Fixed(v, p.value_decimals), r, p.name,
                          Fixed(v, p.value_decimals));
  }
  if (p.points.empty()) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
                          "fill=\"#777\">no round released yet</text>",
                          kLeft + pw / 2, kTop + ph / 2);
  } else {
    const auto& [r, v] = p.points.back();
    absl::StrAppendFormat(&out,
                          "<text class=\"latest\" x=\"%d\" y=\"20\" font-size=\"12\" "
                          "text-anchor=\"end\" fill=\"#222\">round %d: %s</text>",
                          kWidth - kRight, r, Fixed(v, p.value_decimals));
  }
  out += "</svg>\n";
  return out;
}

std::string EpsilonText(double spent, double budget) {
  if (budget > 0) return absl::StrCat(Fixed(spent, 3), " of budget ", Fixed(budget, 3));
  return absl::StrCat(Fixed(spent, 3), " (no budget)");
}

// "z 0.668 per aggregator (for epsilon 2.550), d = 3 (within 1.00x dense
// sharing)": the rounds' noise and block sampling, and the targets that
// set them.
std::string PrivacyText(const TaskDashboard& t) {
  std::string out = t.noise_multiplier > 0
                        ? absl::StrCat("z ", Fixed(t.noise_multiplier, 3), " per aggregator")
                        : std::string("no noise");
  if (t.target_epsilon > 0)
    absl::StrAppend(&out, " (for epsilon ", Fixed(t.target_epsilon, 3), ")");
  absl::StrAppend(&out, ", d = ", t.log_blocks_per_group);
  if (t.max_upload_vs_dense > 0) {
    absl::StrAppend(&out, " (within ", Fixed(t.max_upload_vs_dense, 2), "x dense sharing)");
  }
  return out;
}

std::string DeadlineText(const std::optional<absl::Duration>& left) {
  if (!left.has_value()) return "no round open";
  const double s = absl::ToDoubleSeconds(*left);
  if (s < 0) return absl::StrFormat("passed %.0f s ago", -s);
  return absl::StrFormat("in %.0f s", s);
}

std::string ProgressSection(const TaskDashboard& t) {
  std::string needed = absl::StrCat(t.min_reports, " needed");
  if (t.target_reports > 0) absl::StrAppend(&needed, ", closes early at ", t.target_reports);
  std::string out = absl::StrCat(
      "<section id=\"progress\"><h2>",
      t.phase == "done" ? std::string("Finished") : absl::StrCat("Round ", t.round_id), "</h2><dl>",
      "<dt>Phase</dt><dd id=\"phase\">", HtmlEscape(t.phase), "</dd>",
      "<dt>Released rounds</dt><dd id=\"completed\">", t.completed_rounds, " of ", t.total_rounds,
      "</dd>", "<dt>Assigned clients</dt><dd id=\"assigned\">", t.assigned, "</dd>",
      "<dt>Uploads</dt><dd id=\"uploads\">", t.uploads_done, " done / ", needed, "</dd>",
      "<dt>Deadline</dt><dd id=\"deadline\">", DeadlineText(t.time_to_deadline), "</dd>",
      "<dt>Epsilon spent</dt><dd id=\"epsilon\">", EpsilonText(t.epsilon_spent, t.epsilon_budget),
      "</dd>", "<dt>Privacy</dt><dd id=\"privacy\">", PrivacyText(t), "</dd>");
  if (!t.done_reason.empty()) {
    absl::StrAppend(&out, "<dt>Stopped</dt><dd id=\"done-reason\">", HtmlEscape(t.done_reason),
                    "</dd>");
  }
  out += "</dl></section>\n";
  return out;
}

std::string RoundsTable(const TaskDashboard& t) {
  std::string out = absl::StrCat(
      "<h2>Completed rounds</h2><table id=\"rounds\"><caption>newest first; at most the last ",
      kDashboardMaxRounds,
      " rounds</caption><thead><tr><th>Round</th><th>Accuracy</th><th>Loss</th>"
      "<th>Epsilon spent</th><th>Reports accepted</th><th>Upload bytes</th><th>Seconds</th>"
      "</tr></thead><tbody>\n");
  for (auto it = t.rounds.rbegin(); it != t.rounds.rend(); ++it) {
    const DashboardRound& r = *it;
    const std::string unknown = "<span class=\"muted\">&mdash;</span>";
    absl::StrAppend(&out, "<tr data-round=\"", r.round, "\" data-kind=\"",
                    r.evaluation ? "evaluation" : "training", "\"><td>", r.round,
                    r.evaluation ? " (evaluation)" : "", "</td><td>",
                    r.evaluated ? Fixed(r.accuracy, 4) : unknown, "</td><td>",
                    r.evaluated ? Fixed(r.loss, 4) : unknown, "</td><td>", Fixed(r.epsilon, 3),
                    "</td><td>", r.accepted_reports, "</td><td title=\"", r.bytes_up, " bytes\">",
                    Bytes(r.bytes_up), "</td><td>", Fixed(r.seconds, 1), "</td></tr>\n");
  }
  if (t.rounds.empty()) out += "<tr><td colspan=\"7\">no round completed yet</td></tr>\n";
  out += "</tbody></table>\n";
  return out;
}

// The dashboard of `c`, read now; its rounds only `with_rounds`.
TaskDashboard DashboardOf(Coordinator& c, bool with_rounds) {
  TaskDashboard d = DashboardFromStatus(with_rounds ? c.Status() : c.StatusSummary());
  const CoordinatorOptions& o = c.options();
  d.epsilon_budget = o.task.epsilon_budget;
  d.noise_multiplier = o.task.secure_sum.noise_multiplier;
  d.log_blocks_per_group = o.task.secure_sum.log_blocks_per_group;
  d.target_epsilon = o.target_epsilon;
  d.max_upload_vs_dense = o.max_upload_vs_dense;
  d.min_reports = o.min_reports;
  d.target_reports = o.target_reports;
  d.time_to_deadline = c.TimeToDeadline();
  return d;
}

HttpReply IndexReply(TaskHost* tasks) {
  std::vector<TaskDashboard> rows;
  for (const std::shared_ptr<Coordinator>& c : tasks->Coordinators()) {
    rows.push_back(DashboardOf(*c, /*with_rounds=*/false));  // the index shows none
  }
  return HttpReply{200, kHtml, RenderIndexPage(rows)};
}

}  // namespace

TaskDashboard DashboardFromStatus(const proto::CoordinatorStatusResponse& s) {
  TaskDashboard d;
  d.task_id = s.task_id();
  d.phase = s.phase();
  d.done_reason = s.done_reason();
  d.completed_rounds = s.completed_rounds();
  d.total_rounds = s.total_rounds();
  d.round_id = s.round_id();
  d.assigned = s.assigned();
  d.uploads_done = s.uploads_done();
  d.epsilon_spent = s.epsilon_spent();
  d.last_accuracy = s.last_accuracy();
  const int n = s.history_size();
  const int max_rounds = static_cast<int>(kDashboardMaxRounds);
  const int start = n > max_rounds ? n - max_rounds : 0;
  for (int i = start; i < n; ++i) {
    const proto::RoundSummary& r = s.history(i);
    DashboardRound x;
    x.round = r.model_version();
    x.evaluation = r.has_evaluation();
    x.evaluated = x.evaluation || r.evaluated_by() != "none";
    x.accuracy = r.accuracy();
    x.loss = r.loss();
    x.epsilon = r.epsilon();
    x.accepted_reports = r.accepted_reports();
    x.bytes_up = r.bytes_up();
    x.seconds = r.seconds();
    d.rounds.push_back(x);
  }
  return d;
}

std::string RenderIndexPage(const std::vector<TaskDashboard>& tasks) {
  std::string out = absl::StrCat(
      Head("tandem coordinator: tasks"),
      "<nav><a href=\"/metrics\">/metrics</a></nav><h1>Tasks</h1>\n"
      "<table id=\"tasks\"><thead><tr><th>Task</th><th>Phase</th><th>Released rounds</th>"
      "<th>Last accuracy</th><th>Epsilon spent</th></tr></thead><tbody>\n");
  for (const TaskDashboard& t : tasks) {
    const std::string id = HtmlEscape(t.task_id);
    absl::StrAppend(&out, "<tr data-task=\"", id, "\"><td><a href=\"/tasks/",
                    HtmlEscape(UrlSegment(t.task_id)), "\">", id, "</a></td><td>",
                    HtmlEscape(t.phase), "</td><td>", t.completed_rounds, " of ", t.total_rounds,
                    "</td><td>", Fixed(t.last_accuracy, 4), "</td><td>",
                    EpsilonText(t.epsilon_spent, t.epsilon_budget), "</td></tr>\n");
  }
  if (tasks.empty()) out += "<tr><td colspan=\"5\">no live task</td></tr>\n";
  out += "</tbody></table>\n";
  out += kFoot;
  return out;
}

std::string RenderTaskPage(const TaskDashboard& t) {
  Plot accuracy{"accuracy", "Held-out accuracy", kAccuracyColour, 2, 4, 1.0, std::nullopt, {}};
  Plot epsilon{"epsilon", "Epsilon spent", kEpsilonColour, 2, 3, 1.0, std::nullopt, {}};
  const bool budget = std::isfinite(t.epsilon_budget) && t.epsilon_budget > 0;
  double top = budget ? t.epsilon_budget : 0.0;
  for (const DashboardRound& r : t.rounds) {
    if (r.evaluation) continue;  // the plots follow the released versions
    if (r.evaluated) accuracy.points.push_back({r.round, r.accuracy});
    epsilon.points.push_back({r.round, r.epsilon});
    if (std::isfinite(r.epsilon)) top = std::max(top, r.epsilon);
  }
  epsilon.y_max = top > 0 ? top * 1.1 : 1.0;
  if (budget) epsilon.budget = t.epsilon_budget;
  const std::string id = HtmlEscape(t.task_id);
  std::string out = absl::StrCat(Head(absl::StrCat("tandem task ", t.task_id)),
                                 "<nav><a href=\"/\">all tasks</a> &middot; <a "
                                 "href=\"/metrics\">/metrics</a></nav>"
                                 "<h1>Task <code id=\"task-id\">",
                                 id, "</code></h1>\n");
  out += ProgressSection(t);
  out += "<div class=\"plots\">\n";
  out += RenderPlot(accuracy);
  out += RenderPlot(epsilon);
  out += "</div>\n";
  out += RoundsTable(t);
  out += kFoot;
  return out;
}

std::string RenderNotFoundPage(absl::string_view path) {
  return absl::StrCat(Head("not found"), "<h1>Not found</h1><p>No live task at <code>",
                      HtmlEscape(path), "</code>.</p><p><a href=\"/\">all tasks</a></p>", kFoot);
}

void RegisterCoordinatorDashboard(TaskHost* tasks, MetricsServer* server) {
  server->RegisterPage("/",
                       [tasks](absl::string_view, absl::string_view) { return IndexReply(tasks); });
  server->RegisterPage("/tasks", [tasks](absl::string_view path, absl::string_view) {
    absl::string_view id = path;
    absl::ConsumePrefix(&id, "/tasks");
    if (id.empty() || id == "/") return IndexReply(tasks);
    absl::ConsumePrefix(&id, "/");
    // Exactly a live task's id (no prefix, case or trailing-slash match).
    for (const std::shared_ptr<Coordinator>& c : tasks->Coordinators()) {
      if (c->task_id() == id)
        return HttpReply{200, kHtml, RenderTaskPage(DashboardOf(*c, /*with_rounds=*/true))};
    }
    return HttpReply{404, kHtml, RenderNotFoundPage(path)};
  });
}

}  // namespace tandem::server
