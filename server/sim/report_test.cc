// The report page a user reads: the run's parameters and the per-variant
// summary with the right values, the privacy-utility plot, balanced tags,
// nothing fetched from the network; and the files WriteReport leaves.
#include "server/sim/report.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace tandem::sim {
namespace {

using ::tandem::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

// The baselines of D = 1000 per participant (server/core/upload_baselines.h).
RoundRecord Record(const std::string& variant, int round, int participants, uint64_t bytes_up,
                   double accuracy, double epsilon, double seconds) {
  RoundRecord r;
  r.clear_bytes_up = participants * 4000;
  r.dense_bytes_up = participants * (8000 + 16);
  r.variant = variant;
  r.round = round;
  r.participants = participants;
  r.accepted_reports = participants;
  r.bytes_up = bytes_up;
  r.test_accuracy = accuracy;
  r.epsilon = epsilon;
  r.seconds = seconds;
  return r;
}

// D = 1000: a clear client sends 4000 B, dense sharing 8000 B to the leader
// and a 16-byte seed to the helper. The DP runs send 2 x 1000 B per client.
ReportParameters Parameters() {
  ReportParameters p;
  p.dataset = "fmnist";
  p.model = "mlp (hidden 32)";
  p.mode = "inprocess";
  p.dimension = 1000;
  p.block_size = 64;
  p.blocks = 16;
  p.log_blocks_per_group = 2;
  p.groups = 4;
  p.block_selection = "random";
  p.clip = 2.0;
  p.sample_rate = 0.125;
  p.delta = 1e-5;
  p.rounds = 2;
  p.clients = 160;
  p.local_steps = 20;
  p.client_lr = 0.05;
  p.partition = "mixture";
  p.alpha = 0.5;
  p.norm_proofs = true;
  p.variants = {{"fedavg-clear", "fedavg-clear", false, 0},
                {"fedavg-preamble-dp-z0.5", "fedavg-preamble-dp", true, 0.5},
                {"fedavg-preamble-dp-z2", "fedavg-preamble-dp", true, 2}};
  return p;
}

std::vector<RoundRecord> Records() {
  return {Record("fedavg-clear", 1, 20, 80000, 0.5, 0, 0.5),
          Record("fedavg-clear", 2, 20, 80000, 0.7125, 0, 1.5),
          Record("fedavg-preamble-dp-z0.5", 1, 20, 40000, 0.4, 3.5, 2.0),
          Record("fedavg-preamble-dp-z0.5", 2, 20, 40000, 0.6375, 5.25, 4.0),
          Record("fedavg-preamble-dp-z2", 1, 20, 40000, 0.3, 0.25, 3.0),
          Record("fedavg-preamble-dp-z2", 2, 20, 40000, 0.55, 0.375, 3.0)};
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Report, ParametersTableShowsTheRunsValues) {
  const std::string html = RenderHtml("t", Records(), Parameters());
  EXPECT_THAT(html, HasSubstr("<th>model parameters D</th><td>1000</td>"));
  EXPECT_THAT(html, HasSubstr("<th>block size B</th><td>64</td>"));
  EXPECT_THAT(html, HasSubstr("<th>blocks ceil(D / B)</th><td>16</td>"));
  EXPECT_THAT(html, HasSubstr("<th>blocks sent per report k (groups)</th><td>4 (25.0% of"));
  EXPECT_THAT(html, HasSubstr("<th>clip C (L2)</th><td>2</td>"));
  EXPECT_THAT(html, HasSubstr("0.5 (sigma = 1), 2 (sigma = 4)"));
  EXPECT_THAT(html, HasSubstr("<th>sample rate q (Poisson)</th><td>0.125</td>"));
  EXPECT_THAT(html, HasSubstr("<th>delta</th><td>1e-05</td>"));
  EXPECT_THAT(html, HasSubstr("<th>rounds per variant</th><td>2</td>"));
  EXPECT_THAT(html, HasSubstr("<th>clients</th><td>160</td>"));
  EXPECT_THAT(html, HasSubstr("<th>model</th><td>mlp (hidden 32)</td>"));
}

TEST(Report, SummaryHasAccuracyEpsilonTimeAndBytes) {
  const std::string html = RenderHtml("t", Records(), Parameters());
  EXPECT_THAT(html, HasSubstr("<th>vs clear FedAvg</th><th>vs dense sharing</th>"));
  EXPECT_THAT(html, HasSubstr("of D = 1000 values"));
  EXPECT_THAT(html, HasSubstr("at the round's value width (32 bits where its sum fits, else 64), "
                              "the helper a 16-byte seed"));
  // Clear: 4000 B per client to its one server, 32 bits per coordinate,
  // 4000 / 8016 of dense sharing; mean 1 s per round.
  EXPECT_THAT(html, HasSubstr("<tr><td class=\"name\">fedavg-clear</td><td>clear</td><td>2</td>"
                              "<td>0.7125</td><td>none (clear)</td><td>1.00</td><td>4000</td>"
                              "<td>32.0</td><td>1.000</td><td>0.499</td></tr>"));
  // DP: 2000 B per client, 16 bits per coordinate, half of clear, 2000 / 8016
  // of dense sharing.
  EXPECT_THAT(html, HasSubstr("<tr><td class=\"name\">fedavg-preamble-dp-z0.5</td><td>0.5</td>"
                              "<td>2</td><td>0.6375</td><td>5.250</td><td>3.00</td>"
                              "<td>2000</td><td>16.0</td><td>0.500</td><td>0.250</td></tr>"));
  EXPECT_THAT(html, HasSubstr("<td>0.5500</td><td>0.375</td>"));
}

TEST(Report, EveryPlotHasASentenceAndThePrivacyUtilityPlotIsThere) {
  const std::string html = RenderHtml("t", Records(), Parameters());
  EXPECT_EQ(Count(html, "<svg"), 4);
  EXPECT_EQ(Count(html, "<figcaption>"), 4);
  EXPECT_THAT(html, HasSubstr("Privacy-utility: test accuracy vs epsilon"));
  EXPECT_THAT(html, HasSubstr("fedavg-clear (final)"));              // the baseline line
  EXPECT_THAT(html, HasSubstr("fedavg-preamble-dp (end points)"));  // the sweep joined
  EXPECT_THAT(html, HasSubstr("stroke-dasharray"));
}

TEST(Report, TagsAreBalancedAndNothingIsFetched) {
  const std::string html = RenderHtml("t <&>", Records(), Parameters());
  for (const char* tag : {"html", "head", "body", "table", "tr", "td", "th", "svg", "figure",
                          "figcaption", "text", "h1", "h2", "p", "style", "title", "b"}) {
    // "<tr" would also count "<text": count the tag with its delimiter.
    const int open = Count(html, absl::StrCat("<", tag, ">")) +
                     Count(html, absl::StrCat("<", tag, " "));
    EXPECT_EQ(open, Count(html, absl::StrCat("</", tag, ">"))) << tag;
    EXPECT_GT(open, 0) << tag;
  }
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, HasSubstr("<title>t &lt;&amp;&gt;</title>"));
}

TEST(Report, WithoutParametersOrNoiseThePageStillRenders) {
  // A record of before the baselines (and no D): ratios and bits n/a.
  RoundRecord old = Record("fedavg-clear", 1, 5, 100, 0.5, 0, 1);
  old.clear_bytes_up = old.dense_bytes_up = 0;
  std::vector<RoundRecord> clear = {old};
  const std::string html = RenderHtml("t", clear);
  EXPECT_THAT(html, Not(HasSubstr("<h2>Parameters</h2>")));
  EXPECT_THAT(html, HasSubstr("<td>n/a</td>"));
  EXPECT_THAT(html, HasSubstr("No run with DP noise: no privacy-utility plot."));
  EXPECT_EQ(Count(html, "<svg"), 2);  // accuracy and upload; no epsilon to draw
}

TEST(Report, WriteReportLeavesTheThreeFiles) {
  const std::string dir = tandem::testing::MakeTempDir("tandem-report-test");
  ASSERT_THAT(WriteReport(dir + "/r", "t", Records(), Parameters()), IsOk());
  std::ifstream in(dir + "/r/report.html");
  const std::string page((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(page, RenderHtml("t", Records(), Parameters()));
  EXPECT_TRUE(std::filesystem::exists(dir + "/r/metrics.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/r/metrics.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::sim
