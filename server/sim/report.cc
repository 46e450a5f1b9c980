#include "server/sim/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/html.h"
#include "server/core/upload_baselines.h"

namespace tandem::sim {
namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                         "#e377c2", "#17becf"};
constexpr int kNumColors = 8;

// An axis tick: 3 significant digits, whole numbers from 1000 up (no
// exponent notation on the page).
std::string Tick(double v) {
  return std::fabs(v) >= 1000 ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.3g", v);
}

// One line of an XY plot. horizontal: a line across the whole x range at
// points[0].second (the x values are ignored).
struct Series {
  std::string label;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
  bool markers = false;
  bool horizontal = false;
};

// An inline-SVG line plot with a caption: axes from 0 (y) and from the
// smallest x (or 1 with integer_x, the rounds), five y ticks, the axes'
// labels, a legend on the right.
std::string Plot(const std::string& title, const std::string& caption, const std::string& y_label,
                 const std::string& x_label, bool integer_x, const std::vector<Series>& series) {
  double x0 = integer_x ? 1 : 0, x1 = x0, y1 = 0;
  bool any_x = false;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      y1 = std::max(y1, y);
      if (s.horizontal) continue;
      x1 = any_x ? std::max(x1, x) : std::max(x0, x);
      any_x = true;
    }
  }
  if (y1 <= 0) y1 = 1;
  if (x1 <= x0) x1 = x0 + 1;
  const double w = 520, h = 260, left = 60, bottom = 34, top = 26;
  const auto px = [&](double x) { return left + (w - left) * (x - x0) / (x1 - x0); };
  const auto py = [&](double y) { return h - bottom - (h - bottom - top) * y / y1; };
  std::string svg =
      absl::StrFormat("<figure>\n<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\">",
                      static_cast<int>(w + 260), static_cast<int>(h), HtmlEscape(title));
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>"
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>",
                        left, top, left, h - bottom, left, h - bottom, w, h - bottom);
  for (int t = 0; t <= 4; ++t) {
    const double y = y1 * t / 4.0;
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%s</text>",
                          left - 4, py(y) + 4, Tick(y));
  }
  std::vector<double> ticks;
  if (integer_x) {
    const int step = std::max(1, static_cast<int>(std::ceil((x1 - x0) / 10)));
    for (int r = static_cast<int>(x0); r <= static_cast<int>(x1); r += step) ticks.push_back(r);
  } else {
    for (int t = 0; t <= 4; ++t) ticks.push_back(x0 + (x1 - x0) * t / 4.0);
  }
  for (double x : ticks) {
    absl::StrAppendFormat(
        &svg, "<text x=\"%.1f\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%s</text>",
        px(x), h - bottom + 14, Tick(x));
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%s</text>",
                        (left + w) / 2, h - 4, HtmlEscape(x_label));
  absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" font-size=\"11\">%s</text>", left + 6,
                        top - 6, HtmlEscape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string dash = s.dashed ? " stroke-dasharray=\"6,4\"" : "";
    if (s.horizontal) {
      if (s.points.empty()) continue;
      absl::StrAppendFormat(&svg,
                            "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"%s\" "
                            "stroke-width=\"2\"%s/>",
                            left, py(s.points[0].second), w, py(s.points[0].second), s.color, dash);
    } else {
      std::string points;
      for (const auto& [x, y] : s.points) absl::StrAppendFormat(&points, "%.1f,%.1f ", px(x), py(y));
      absl::StrAppendFormat(&svg,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
                            "points=\"%s\"/>",
                            s.color, dash, points);
      if (s.markers) {
        for (const auto& [x, y] : s.points) {
          absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>",
                                px(x), py(y), s.color);
        }
      }
    }
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" font-size=\"12\" fill=\"%s\">%s</text>",
                          w + 10, top + 16 * (i + 1), s.color, HtmlEscape(s.label));
  }
  absl::StrAppendFormat(&svg, "</svg>\n<figcaption><b>%s.</b> %s</figcaption>\n</figure>\n",
                        HtmlEscape(title), HtmlEscape(caption));
  return svg;
}

// The records grouped by variant, in the order the variants first appear.
std::vector<std::pair<std::string, std::vector<const RoundRecord*>>> ByVariant(
    const std::vector<RoundRecord>& records) {
  std::vector<std::pair<std::string, std::vector<const RoundRecord*>>> out;
  std::map<std::string, size_t> index;
  for (const RoundRecord& r : records) {
    auto [it, added] = index.emplace(r.variant, out.size());
    if (added) out.push_back({r.variant, {}});
    out[it->second].second.push_back(&r);
  }
  return out;
}

const ReportVariant* FindVariant(const ReportParameters& p, const std::string& name) {
  for (const ReportVariant& v : p.variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// Private: from the parameters, else from the bytes (a clear round sends
// exactly its float32 update).
bool IsPrivate(const ReportParameters& p, const std::string& name,
               const std::vector<const RoundRecord*>& rounds) {
  if (const ReportVariant* v = FindVariant(p, name)) return v->private_aggregation;
  for (const RoundRecord* r : rounds) {
    if (r->epsilon > 0 || (r->clear_bytes_up > 0 && r->bytes_up != r->clear_bytes_up)) return true;
  }
  return false;
}

// One series per variant of `value(record)` against the round.
std::vector<Series> PerRound(const std::vector<RoundRecord>& records, bool private_only,
                             const ReportParameters& p, double (*value)(const RoundRecord&)) {
  std::vector<Series> out;
  const auto groups = ByVariant(records);
  for (size_t v = 0; v < groups.size(); ++v) {
    if (private_only && !IsPrivate(p, groups[v].first, groups[v].second)) continue;
    Series s{groups[v].first, kColors[v % kNumColors], {}};
    for (const RoundRecord* r : groups[v].second) s.points.push_back({r->round, value(*r)});
    out.push_back(std::move(s));
  }
  return out;
}

// Accuracy against cumulative epsilon: every DP run's rounds, a dashed line
// joining the end points of runs of one family (a noise sweep), and the
// clear variants' final accuracy as horizontal lines. Empty without a DP run.
std::string PrivacyUtility(const std::vector<RoundRecord>& records, const ReportParameters& p) {
  const auto groups = ByVariant(records);
  std::vector<Series> series;
  std::vector<std::string> family_order;
  std::map<std::string, std::vector<std::pair<double, double>>> family_ends;
  for (size_t v = 0; v < groups.size(); ++v) {
    const auto& [name, rounds] = groups[v];
    const bool priv = IsPrivate(p, name, rounds);
    if (!priv) {
      series.push_back({absl::StrCat(name, " (final)"), kColors[v % kNumColors],
                        {{0, rounds.back()->test_accuracy}}, true, false, true});
      continue;
    }
    if (rounds.back()->epsilon <= 0) continue;  // no noise: no epsilon to plot against
    Series s{name, kColors[v % kNumColors], {}, false, true};
    for (const RoundRecord* r : rounds) s.points.push_back({r->epsilon, r->test_accuracy});
    series.push_back(std::move(s));
    const ReportVariant* rv = FindVariant(p, name);
    const std::string family = rv && !rv->family.empty() ? rv->family : name;
    if (!family_ends.count(family)) family_order.push_back(family);
    family_ends[family].push_back({rounds.back()->epsilon, rounds.back()->test_accuracy});
  }
  bool any_dp = false;
  for (const Series& s : series) any_dp |= !s.horizontal;
  if (!any_dp) return "";
  for (const std::string& f : family_order) {
    auto ends = family_ends[f];
    if (ends.size() < 2) continue;
    std::sort(ends.begin(), ends.end());
    series.push_back({absl::StrCat(f, " (end points)"), "#333", ends, true, false});
  }
  return Plot("Privacy-utility: test accuracy vs epsilon",
              absl::StrFormat("Each DP run's test accuracy against the epsilon it had spent "
                              "(delta = %g) after each round, one dot per round, the last dot "
                              "being the run's end; a black dashed line joins the end points "
                              "of runs that differ only in their noise multiplier, and a "
                              "horizontal dashed line marks the clear FedAvg baseline's final "
                              "accuracy (no privacy).",
                              p.delta > 0 ? p.delta : 1e-5),
              "test accuracy", "epsilon (cumulative)", false, series);
}

std::string Row(const std::string& name, const std::string& value) {
  return absl::StrCat("<tr><th>", HtmlEscape(name), "</th><td>", HtmlEscape(value), "</td></tr>\n");
}

std::string ParametersTable(const ReportParameters& p) {
  std::set<double> noises;
  for (const ReportVariant& v : p.variants) {
    if (v.private_aggregation) noises.insert(v.noise_multiplier);
  }
  std::vector<std::string> z;
  for (double n : noises) z.push_back(absl::StrFormat("%g (sigma = %g)", n, n * p.clip));
  std::string t = "<h2>Parameters</h2>\n<table class=\"params\">\n";
  t += Row("dataset", p.dataset);
  t += Row("model", p.model);
  t += Row("clients", absl::StrCat(p.clients));
  t += Row("rounds per variant", absl::StrCat(p.rounds));
  t += Row("sample rate q (Poisson)", absl::StrFormat("%g", p.sample_rate));
  t += Row("local steps, client learning rate", absl::StrFormat("%d, %g", p.local_steps, p.client_lr));
  t += Row("client split", absl::StrFormat("%s (alpha %g)", p.partition, p.alpha));
  t += Row("model parameters D", absl::StrCat(p.dimension));
  t += Row("block size B", absl::StrCat(p.block_size));
  t += Row("blocks ceil(D / B)", absl::StrCat(p.blocks));
  t += Row("d (one of 2^d blocks per group)", absl::StrCat(p.log_blocks_per_group));
  t += Row("blocks sent per report k (groups)",
           absl::StrFormat("%d (%.1f%% of the blocks)", p.groups,
                           p.blocks > 0 ? 100.0 * p.groups / p.blocks : 0.0));
  t += Row("block selection", p.block_selection);
  t += Row("clip C (L2)", absl::StrFormat("%g", p.clip));
  t += Row("noise multiplier z per aggregator",
           z.empty() ? std::string("none (no private variant)") : absl::StrJoin(z, ", "));
  t += Row("delta", absl::StrFormat("%g", p.delta));
  t += Row("norm proofs", p.norm_proofs ? "on" : "off");
  t += Row("mode", p.mode);
  t += "</table>\n";
  return t;
}

std::string Ratio(double a, double b) { return b > 0 ? absl::StrFormat("%.3f", a / b) : "n/a"; }

std::string SummaryTable(const std::vector<RoundRecord>& records, const ReportParameters& p) {
  std::string t = "<h2>Summary per variant</h2>\n<table class=\"summary\">\n";
  t += "<tr><th>variant</th><th>noise z</th><th>rounds</th><th>final accuracy</th>"
       "<th>final epsilon</th><th>mean s / round</th><th>bytes / client (both servers)</th>"
       "<th>bits / coordinate</th><th>vs clear FedAvg</th><th>vs dense sharing</th></tr>\n";
  for (const auto& [name, rounds] : ByVariant(records)) {
    const bool priv = IsPrivate(p, name, rounds);
    const ReportVariant* rv = FindVariant(p, name);
    double seconds = 0, bytes = 0, clear = 0, dense = 0, clients = 0, coords = 0;
    for (const RoundRecord* r : rounds) {
      seconds += r->seconds;
      bytes += r->bytes_up;
      clients += r->participants;
      // The baselines of the round's real D (FedLUAR rounds send fewer
      // tensors); records without them (older metrics) fall back to the
      // model's D.
      const bool known = r->clear_bytes_up > 0;
      const double n = r->participants;
      clear += known ? r->clear_bytes_up : n * server::ClearFedAvgBytes(p.dimension);
      dense += known ? r->dense_bytes_up
                     : (p.dimension > 0 ? n * server::DenseSharingBytes(p.dimension) : 0.0);
      coords += known ? r->clear_bytes_up / 4.0 : n * p.dimension;
    }
    const RoundRecord& last = *rounds.back();
    absl::StrAppendFormat(
        &t,
        "<tr><td class=\"name\">%s</td><td>%s</td><td>%d</td><td>%.4f</td><td>%s</td>"
        "<td>%.2f</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
        HtmlEscape(name),
        !priv ? "clear"
        : rv  ? absl::StrFormat("%g", rv->noise_multiplier)
              : "?",
        rounds.size(), last.test_accuracy,
        priv && last.epsilon > 0 ? absl::StrFormat("%.3f", last.epsilon)
                                 : std::string(priv ? "no DP" : "none (clear)"),
        seconds / rounds.size(), clients > 0 ? bytes / clients : 0.0,
        coords > 0 ? absl::StrFormat("%.1f", 8 * bytes / coords) : std::string("n/a"),
        Ratio(bytes, clear), Ratio(bytes, dense));
  }
  absl::StrAppendFormat(
      &t,
      "</table>\n<p class=\"note\">Bytes per client: each round's upload bytes over its "
      "participants, both servers together (a private report's serialized requests: key shares, "
      "norm proof, ticket, signatures). Ratios compare the same clients' updates (of D = %d "
      "values, or fewer in a FedLUAR round) sent as clear FedAvg (D float32 values to one "
      "server, 32 bits per coordinate) and as Prio3-style dense two-server sharing (the leader "
      "receives D values at the round's value width (32 bits where its sum fits, else 64), "
      "the helper a %d-byte seed that expands to "
      "its share; payload only, no proof or ticket counted): below 1 the private upload is "
      "smaller (n/a: D unknown).</p>\n",
      p.dimension, server::kDenseHelperSeedBytes);
  return t;
}

std::string RoundsTable(const std::vector<RoundRecord>& records) {
  std::string t =
      "<h2>Every round</h2>\n<table class=\"rounds\">\n<tr><th>variant</th><th>round</th>"
      "<th>clients</th><th>reports</th><th>accuracy</th><th>KiB up</th><th>clear KiB</th>"
      "<th>dense KiB</th><th>epsilon</th><th>s</th></tr>\n";
  for (const RoundRecord& r : records) {
    absl::StrAppendFormat(&t,
                          "<tr><td class=\"name\">%s</td><td>%d</td><td>%d</td><td>%d</td>"
                          "<td>%.4f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.3f</td>"
                          "<td>%.2f</td>"
                          "</tr>\n",
                          HtmlEscape(r.variant), r.round, r.participants, r.accepted_reports,
                          r.test_accuracy, r.bytes_up / 1024.0, r.clear_bytes_up / 1024.0,
                          r.dense_bytes_up / 1024.0, r.epsilon, r.seconds);
  }
  t += "</table>\n";
  return t;
}

double Accuracy(const RoundRecord& r) { return r.test_accuracy; }
double KiBUp(const RoundRecord& r) { return r.bytes_up / 1024.0; }
double Epsilon(const RoundRecord& r) { return r.epsilon; }

}  // namespace

std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records,
                       const ReportParameters& p) {
  std::string html =
      absl::StrCat("<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>",
                   HtmlEscape(title),
                   "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:60em}"
                   "table{border-collapse:collapse;margin:0.5em 0}"
                   "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
                   "td.name,table.params th,table.params "
                   "td{text-align:left}figcaption{max-width:48em;font-size:0.9em}"
                   "p.note{font-size:0.9em;max-width:48em}</style>\n</head>\n<body>\n<h1>",
                   HtmlEscape(title), "</h1>\n");
  if (p.dimension > 0) html += ParametersTable(p);
  if (!records.empty()) html += SummaryTable(records, p);
  html += "<h2>Plots</h2>\n";
  html += Plot("Test accuracy vs round",
               "The global model's accuracy on the held-out test set after each round, one line "
               "per variant; the clear FedAvg baseline averages the updates with neither PREAMBLE "
               "nor noise.",
               "test accuracy", "round", true, PerRound(records, false, p, Accuracy));
  html += Plot("Upload per round, all clients (KiB)",
               "The bytes all of a round's participants uploaded (a private variant: to both "
               "servers together); it follows the cohort size, which Poisson sampling varies "
               "from round to round (variants that send the same bytes draw over one another).",
               "KiB uploaded", "round", true, PerRound(records, false, p, KiBUp));
  std::vector<Series> eps = PerRound(records, true, p, Epsilon);
  if (!eps.empty()) {
    html += Plot("Privacy spent: epsilon vs round",
                 absl::StrFormat("The cumulative epsilon at delta = %g of each private variant "
                                 "after each round (RDP accountant, Poisson subsampling at rate "
                                 "q; 0 without noise); the clear baseline has no privacy "
                                 "guarantee and is not drawn.",
                                 p.delta > 0 ? p.delta : 1e-5),
                 "epsilon", "round", true, eps);
  }
  if (std::string pu = PrivacyUtility(records, p); !pu.empty()) {
    html += pu;
  } else {
    html += "<p class=\"note\">No run with DP noise: no privacy-utility plot.</p>\n";
  }
  html += RoundsTable(records);
  html += "</body>\n</html>\n";
  return html;
}

std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records) {
  return RenderHtml(title, records, ReportParameters{});
}

absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records) {
  return WriteReport(dir, title, records, ReportParameters{});
}

absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records, const ReportParameters& p) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::ofstream csv(dir + "/metrics.csv");
  csv << "variant,round,participants,accepted_reports,test_accuracy,test_loss,bytes_up,"
         "clear_bytes_up,dense_bytes_up,bytes_down,epsilon,seconds,train_seconds,encode_seconds,"
         "aggregate_seconds,train_flops,encoding\n";
  std::ofstream json(dir + "/metrics.json");
  json << "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const RoundRecord& r = records[i];
    csv << absl::StrFormat("%s,%d,%d,%d,%.6f,%.6f,%d,%d,%d,%d,%.6f,%.3f,%.4f,%.4f,%.4f,%.4g,%s\n",
                           r.variant, r.round, r.participants, r.accepted_reports, r.test_accuracy,
                           r.test_loss, r.bytes_up, r.clear_bytes_up, r.dense_bytes_up,
                           r.bytes_down, r.epsilon, r.seconds, r.train_seconds, r.encode_seconds,
                           r.aggregate_seconds, r.train_flops, r.encoding);
    json << absl::StrFormat(
        "  {\"variant\": \"%s\", \"round\": %d, \"participants\": %d, \"accepted_reports\": %d, "
        "\"test_accuracy\": %.6f, \"test_loss\": %.6f, \"bytes_up\": %d, \"clear_bytes_up\": %d, "
        "\"dense_bytes_up\": %d, "
        "\"bytes_down\": %d, \"epsilon\": %.6f, \"seconds\": %.3f, \"train_seconds\": %.4f, "
        "\"encode_seconds\": %.4f, \"aggregate_seconds\": %.4f, \"train_flops\": %.4g, "
        "\"encoding\": \"%s\"}%s\n",
        r.variant, r.round, r.participants, r.accepted_reports, r.test_accuracy, r.test_loss,
        r.bytes_up, r.clear_bytes_up, r.dense_bytes_up, r.bytes_down, r.epsilon, r.seconds,
        r.train_seconds, r.encode_seconds, r.aggregate_seconds, r.train_flops, r.encoding,
        i + 1 < records.size() ? "," : "");
  }
  json << "]\n";
  std::ofstream html(dir + "/report.html");
  html << RenderHtml(title, records, p);
  if (!csv || !json || !html) return absl::InternalError(absl::StrCat("cannot write into ", dir));
  return absl::OkStatus();
}

}  // namespace tandem::sim
