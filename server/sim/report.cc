#include "server/sim/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::sim {
namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

// One line chart of `value(record)` per variant.
std::string Chart(const std::string& title, const std::vector<RoundRecord>& records,
                  double (*value)(const RoundRecord&)) {
  std::map<std::string, std::vector<const RoundRecord*>> by_variant;
  std::vector<std::string> order;
  double max_v = 0;
  int max_round = 1;
  for (const RoundRecord& r : records) {
    if (!by_variant.count(r.variant)) order.push_back(r.variant);
    by_variant[r.variant].push_back(&r);
    max_v = std::max(max_v, value(r));
    max_round = std::max(max_round, r.round);
  }
  if (max_v <= 0) max_v = 1;
  const double w = 520, h = 260, left = 60, bottom = 30, top = 20;
  std::string svg = absl::StrFormat(
      "<figure><figcaption>%s</figcaption><svg width=\"%d\" height=\"%d\" "
      "xmlns=\"http://www.w3.org/2000/svg\">",
      title, static_cast<int>(w + 240), static_cast<int>(h));
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>"
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#444\"/>",
                        left, top, left, h - bottom, left, h - bottom, w, h - bottom);
  for (int t = 0; t <= 4; ++t) {
    const double y = h - bottom - (h - bottom - top) * t / 4.0;
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%.3g</text>",
                          left - 4, y + 4, max_v * t / 4.0);
  }
  for (int r = 1; r <= max_round; ++r) {
    const double x = left + (w - left) * (max_round == 1 ? 0.5 : (r - 1.0) / (max_round - 1.0));
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\">%d</text>",
                          x, h - bottom + 14, r);
  }
  absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" font-size=\"11\">round</text>", w + 8,
                        h - bottom + 14);
  for (size_t v = 0; v < order.size(); ++v) {
    std::string points;
    for (const RoundRecord* r : by_variant[order[v]]) {
      const double x = left + (w - left) * (max_round == 1 ? 0.5 : (r->round - 1.0) / (max_round - 1.0));
      const double y = h - bottom - (h - bottom - top) * value(*r) / max_v;
      absl::StrAppendFormat(&points, "%.1f,%.1f ", x, y);
    }
    const char* color = kColors[v % 6];
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>"
                          "<text x=\"%g\" y=\"%g\" font-size=\"12\" fill=\"%s\">%s</text>",
                          color, points, w + 10, top + 16 * (v + 1), color, order[v]);
  }
  svg += "</svg></figure>\n";
  return svg;
}

double Accuracy(const RoundRecord& r) { return r.test_accuracy; }
double KiBUp(const RoundRecord& r) { return r.bytes_up / 1024.0; }
double Epsilon(const RoundRecord& r) { return r.epsilon; }

}  // namespace

std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records) {
  std::string html = absl::StrCat(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>", title,
      "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body><h1>",
      title, "</h1>\n");
  html += Chart("Test accuracy vs round", records, Accuracy);
  html += Chart("Upload per round, all clients (KiB)", records, KiBUp);
  html += Chart("Privacy spent: epsilon vs round", records, Epsilon);
  html += "<table><tr><th>variant</th><th>round</th><th>clients</th><th>reports</th>"
          "<th>accuracy</th><th>KiB up</th><th>dense KiB</th><th>epsilon</th><th>s</th></tr>\n";
  for (const RoundRecord& r : records) {
    absl::StrAppendFormat(&html,
                          "<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%.4f</td>"
                          "<td>%.1f</td><td>%.1f</td><td>%.3f</td><td>%.2f</td></tr>\n",
                          r.variant, r.round, r.participants, r.accepted_reports, r.test_accuracy,
                          r.bytes_up / 1024.0, r.dense_bytes_up / 1024.0, r.epsilon, r.seconds);
  }
  html += "</table></body></html>\n";
  return html;
}

absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::ofstream csv(dir + "/metrics.csv");
  csv << "variant,round,participants,accepted_reports,test_accuracy,test_loss,bytes_up,"
         "dense_bytes_up,bytes_down,epsilon,seconds,train_seconds,encode_seconds,"
         "aggregate_seconds,train_flops\n";
  std::ofstream json(dir + "/metrics.json");
  json << "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const RoundRecord& r = records[i];
    csv << absl::StrFormat("%s,%d,%d,%d,%.6f,%.6f,%d,%d,%d,%.6f,%.3f,%.4f,%.4f,%.4f,%.4g\n",
                           r.variant, r.round, r.participants, r.accepted_reports,
                           r.test_accuracy, r.test_loss, r.bytes_up, r.dense_bytes_up,
                           r.bytes_down, r.epsilon, r.seconds, r.train_seconds,
                           r.encode_seconds, r.aggregate_seconds, r.train_flops);
    json << absl::StrFormat(
        "  {\"variant\": \"%s\", \"round\": %d, \"participants\": %d, \"accepted_reports\": %d, "
        "\"test_accuracy\": %.6f, \"test_loss\": %.6f, \"bytes_up\": %d, \"dense_bytes_up\": %d, "
        "\"bytes_down\": %d, \"epsilon\": %.6f, \"seconds\": %.3f, \"train_seconds\": %.4f, "
        "\"encode_seconds\": %.4f, \"aggregate_seconds\": %.4f, \"train_flops\": %.4g}%s\n",
        r.variant, r.round, r.participants, r.accepted_reports, r.test_accuracy, r.test_loss,
        r.bytes_up, r.dense_bytes_up, r.bytes_down, r.epsilon, r.seconds, r.train_seconds,
        r.encode_seconds, r.aggregate_seconds, r.train_flops, i + 1 < records.size() ? "," : "");
  }
  json << "]\n";
  std::ofstream html(dir + "/report.html");
  html << RenderHtml(title, records);
  if (!csv || !json || !html) return absl::InternalError(absl::StrCat("cannot write into ", dir));
  return absl::OkStatus();
}

}  // namespace tandem::sim
