// The coordinator's live dashboard (server/service/coordinator_dashboard.h)
// as an operator sees it: a small private federation of real processes on
// loopback (both tandem-aggregator daemons, tandem-coordinator with DP noise
// and a budget, three tandem-client processes) runs three rounds; its task
// page is fetched over HTTP from the metrics port and rendered by headless
// Chromium, whose DOM must hold both plots with one point per released round
// and the rounds the coordinator's status RPC reports, and whose screenshot
// must show both lines, each in its own plot. Skipped when Chromium is not
// installed (Debian package chromium, deploy/install-deps.sh). With
// TANDEM_DASHBOARD_SCREENSHOT=/some/file.png set, the screenshot (and the
// DOM, beside it as .png.html) is kept there.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/testing/http_get.h"
#include "gtest/gtest.h"
#include "tests/dashboard/png_decode.h"
#include "tests/integration/federation_fixture.h"

namespace tandem::testing {
namespace {

constexpr int kRounds = 3;
constexpr int kClients = 3;
// The page's line colours (coordinator_dashboard.cc), found in the screenshot.
constexpr Rgb kAccuracyColour{0x15, 0x65, 0xc0};
constexpr Rgb kEpsilonColour{0xc6, 0x28, 0x28};

// The path of the first of Chromium's usual names on PATH, "" when none.
std::string FindChromium() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(dir, "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

// Runs `command` through /bin/sh; its stdout, with its stderr appended to
// `log`. INTERNAL when it cannot be started or exits non-zero.
absl::StatusOr<std::string> Shell(const std::string& command, const std::string& log) {
  FILE* p = popen((command + " 2>>" + log).c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen failed: " + command);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) return absl::InternalError(absl::StrCat("exit status ", rc, ": ", command));
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Where pixels of one colour lie in a screenshot.
struct Found {
  int pixels = 0;
  int min_x = 1 << 30, max_x = -1, min_y = 1 << 30, max_y = -1;
};

Found FindColour(const Image& img, Rgb c, int tolerance = 12) {
  Found f;
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const Rgb& p = img.at(x, y);
      if (std::abs(p.r - c.r) <= tolerance && std::abs(p.g - c.g) <= tolerance &&
          std::abs(p.b - c.b) <= tolerance) {
        ++f.pixels;
        f.min_x = std::min(f.min_x, x);
        f.max_x = std::max(f.max_x, x);
        f.min_y = std::min(f.min_y, y);
        f.max_y = std::max(f.max_y, y);
      }
    }
  }
  return f;
}

// The rounds table row of `r` as the page renders it, up to its reports
// accepted (the cells the status RPC gives exactly).
std::string RowOf(const proto::RoundSummary& r) {
  return absl::StrFormat(
      "<tr data-round=\"%d\" data-kind=\"training\"><td>%d</td><td>%.4f</td><td>%.4f</td>"
      "<td>%.3f</td><td>%d</td>",
      r.model_version(), r.model_version(), r.accuracy(), r.loss(), r.epsilon(),
      r.accepted_reports());
}

class DashboardTest : public FederationFixture {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
    FederationFixture::SetUp();
  }
  void TearDown() override {
    if (!dir_.empty()) FederationFixture::TearDown();
  }
  // Headless Chromium on `url` with `flags`; its stdout.
  absl::StatusOr<std::string> Chromium(const std::string& flags, const std::string& url) {
    return Shell(absl::StrCat("timeout 60 ", chromium_,
                              " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage "
                              "--no-first-run --hide-scrollbars --user-data-dir=",
                              dir_, "/chromium ", flags, " '", url, "'"),
                 dir_ + "/chromium.log");
  }

  std::string chromium_;
};

TEST_F(DashboardTest, ChromiumDrawsTheRoundsOfALiveFederation) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(
      {absl::StrCat("--rounds=", kRounds), absl::StrCat("--target_reports=", kClients),
       absl::StrCat("--min_reports=", kClients), "--round_timeout_s=30", "--noise_multiplier=1",
       "--epsilon_budget=40"}));
  for (int k = 0; k < kClients; ++k) ASSERT_NO_FATAL_FAILURE(StartClient(k, kClients));
  const proto::CoordinatorStatusResponse status =
      WaitFor([](const auto& s) { return s.phase() == "done"; }, absl::Seconds(60));
  ASSERT_EQ(status.completed_rounds(), static_cast<uint64_t>(kRounds)) << status.DebugString();
  ASSERT_EQ(status.history_size(), kRounds);
  EXPECT_GT(status.epsilon_spent(), 0);
  const int port = coordinator_->named_port("metrics");
  ASSERT_GT(port, 0);
  const std::string url = absl::StrCat("http://127.0.0.1:", port, "/tasks/default");

  // Over HTTP: the page and its headers, the index, an unknown task.
  const std::string http = HttpGet(port, "/tasks/default");
  ASSERT_NE(http.find("HTTP/1.1 200 OK"), std::string::npos) << http;
  EXPECT_NE(http.find("Content-Type: text/html"), std::string::npos);
  EXPECT_NE(http.find("Cache-Control: no-store"), std::string::npos);
  EXPECT_NE(http.find("X-Content-Type-Options: nosniff"), std::string::npos);
  EXPECT_NE(http.find("Content-Security-Policy: default-src 'none'"), std::string::npos);
  EXPECT_EQ(http.find("<script"), std::string::npos);
  EXPECT_NE(HttpGet(port, "/").find("<a href=\"/tasks/default\">default</a>"), std::string::npos);
  EXPECT_NE(HttpGet(port, "/tasks/defaultx").find("404 Not Found"), std::string::npos);
  EXPECT_NE(HttpGet(port, "/metrics").find("tandem_coordinator_completed_rounds"),
            std::string::npos);

  // What Chromium builds from it: both plots with one point per released
  // round, the budget line, and the rows of the status RPC's rounds.
  absl::StatusOr<std::string> dom = Chromium("--dump-dom", url);
  ASSERT_TRUE(dom.ok()) << dom.status() << "\n" << ReadFile(dir_ + "/chromium.log");
  for (const std::string& page : {http, *dom}) {
    const std::string accuracy = Between(page, "<svg id=\"accuracy-plot\"", "</svg>");
    const std::string epsilon = Between(page, "<svg id=\"epsilon-plot\"", "</svg>");
    EXPECT_NE(accuracy.find(absl::StrCat("data-points=\"", kRounds, "\"")), std::string::npos)
        << accuracy;
    EXPECT_NE(epsilon.find(absl::StrCat("data-points=\"", kRounds, "\"")), std::string::npos)
        << epsilon;
    EXPECT_EQ(Count(accuracy, "<circle "), static_cast<size_t>(kRounds));
    EXPECT_NE(epsilon.find("id=\"epsilon-budget\" data-budget=\"40.000\""), std::string::npos);
    EXPECT_EQ(Count(page, "<tr data-round="), static_cast<size_t>(kRounds));
    for (const proto::RoundSummary& r : status.history()) {
      EXPECT_NE(page.find(RowOf(r)), std::string::npos) << RowOf(r) << "\n" << page;
      EXPECT_NE(accuracy.find(absl::StrFormat("<title>round %d: accuracy %.4f</title>",
                                              r.model_version(), r.accuracy())),
                std::string::npos);
      EXPECT_NE(epsilon.find(absl::StrFormat("<title>round %d: epsilon %.3f</title>",
                                             r.model_version(), r.epsilon())),
                std::string::npos);
    }
    EXPECT_NE(page.find("<dd id=\"phase\">done</dd>"), std::string::npos);
  }

  // What it draws: a page that is not blank, the accuracy line across the
  // left plot and the epsilon line across the right one.
  const std::string shot = dir_ + "/dashboard.png";
  absl::StatusOr<std::string> drawn =
      Chromium(absl::StrCat("--screenshot=", shot, " --window-size=1200,900"), url);
  ASSERT_TRUE(drawn.ok()) << drawn.status() << "\n" << ReadFile(dir_ + "/chromium.log");
  if (const char* keep = std::getenv("TANDEM_DASHBOARD_SCREENSHOT")) {  // to look at it
    std::filesystem::copy_file(shot, keep, std::filesystem::copy_options::overwrite_existing);
    std::ofstream(std::string(keep) + ".html") << *dom;
  }
  absl::StatusOr<Image> img = DecodePng(ReadFile(shot));
  ASSERT_TRUE(img.ok()) << img.status();
  EXPECT_EQ(img->width, 1200);
  EXPECT_EQ(img->height, 900);
  int ink = 0;
  for (const Rgb& p : img->pixels) ink += (p.r < 200 || p.g < 200 || p.b < 200) ? 1 : 0;
  EXPECT_GT(ink, 5000) << "a blank screenshot";
  const Found accuracy = FindColour(*img, kAccuracyColour);
  const Found epsilon = FindColour(*img, kEpsilonColour);
  // A 3-pixel line across most of a 484-pixel-wide plot, plus its markers.
  EXPECT_GT(accuracy.pixels, 600);
  EXPECT_GT(epsilon.pixels, 600);
  EXPECT_GT(accuracy.max_x - accuracy.min_x, 400);
  EXPECT_GT(epsilon.max_x - epsilon.min_x, 400);
  EXPECT_LT(accuracy.max_x, epsilon.min_x) << "the plots overlap or are out of order";
  // Both plots below the heading and the round's summary, within the window.
  EXPECT_GT(accuracy.min_y, 100);
  EXPECT_LT(accuracy.max_y, 900);
  EXPECT_GT(epsilon.min_y, 100);
  // Epsilon only grows: the line's right end (inside its marker) is higher
  // on the screen than its left end.
  auto top_of = [&](int x) {
    for (int y = 0; y < img->height; ++y) {
      const Rgb& p = img->at(x, y);
      if (std::abs(p.r - kEpsilonColour.r) <= 12 && std::abs(p.g - kEpsilonColour.g) <= 12 &&
          std::abs(p.b - kEpsilonColour.b) <= 12) {
        return y;
      }
    }
    return -1;
  };
  const int left_y = top_of(epsilon.min_x + 3), right_y = top_of(epsilon.max_x - 3);
  ASSERT_GE(left_y, 0);
  ASSERT_GE(right_y, 0);
  EXPECT_GT(left_y, right_y);
}

}  // namespace
}  // namespace tandem::testing
