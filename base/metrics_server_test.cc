// MetricsServer over loopback: registry counters and scrape-time families
// on /metrics, several scrapes at once, the bound port with port 0, the
// error codes of bad or taken addresses, and HTML pages beside /metrics
// (routing, methods, the headers every response carries).
#include "base/metrics_server.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/http_get.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::tandem::testing::Body;
using ::tandem::testing::HttpGet;
using ::tandem::testing::HttpRequest;
using ::tandem::testing::StatusIs;
using ::tandem::testing::StatusLine;

// The headers every response carries.
void ExpectSafeHeaders(const std::string& response) {
  EXPECT_NE(response.find("\r\nCache-Control: no-store\r\n"), std::string::npos) << response;
  EXPECT_NE(response.find("\r\nX-Content-Type-Options: nosniff\r\n"), std::string::npos)
      << response;
  EXPECT_NE(response.find("\r\nContent-Security-Policy: default-src 'none'; style-src "
                          "'unsafe-inline'; img-src data:"),
            std::string::npos)
      << response;
}

TEST(MetricsServer, ServesRegistriesAndCallbackFamilies) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0"));
  ASSERT_GT(server->port(), 0);
  auto registry = std::make_shared<prometheus::Registry>();
  auto& uploads =
      prometheus::BuildCounter().Name("t_uploads_total").Help("Uploads.").Register(*registry);
  uploads.Add({{"code", "OK"}}).Increment(3);
  server->Register(registry);
  std::atomic<int> scrapes{0};
  server->Register(std::make_shared<CallbackCollectable>([&scrapes] {
    ++scrapes;
    MetricFamilies out;
    out.Gauge("t_epsilon", "Epsilon.").Add({{"task", "a"}}, 0.5).Add({{"task", "b"}}, 2);
    out.Counter("t_refused_total", "Refused.").Add({}, 7);
    return out.Take();
  }));
  const std::string page = HttpGet(server->port(), "/metrics");
  EXPECT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE t_uploads_total counter"), std::string::npos) << page;
  EXPECT_NE(page.find("t_uploads_total{code=\"OK\"} 3"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE t_epsilon gauge"), std::string::npos) << page;
  EXPECT_NE(page.find("t_epsilon{task=\"a\"} 0.5"), std::string::npos) << page;
  EXPECT_NE(page.find("t_epsilon{task=\"b\"} 2"), std::string::npos) << page;
  EXPECT_NE(page.find("t_refused_total 7"), std::string::npos) << page;
  EXPECT_EQ(scrapes.load(), 1);
  EXPECT_EQ(HttpGet(server->port(), "/other").find("200 OK"), std::string::npos);
}

TEST(MetricsServer, ConcurrentScrapes) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0", 4));
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("t_c_total").Help("C.").Register(*registry).Add({}).Increment();
  server->Register(registry);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        if (HttpGet(server->port(), "/metrics").find("t_c_total 1") != std::string::npos) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

TEST(MetricsServer, ErrorCodes) {
  EXPECT_THAT(MetricsServer::Start("127.0.0.1").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsServer::Start("127.0.0.1:99999").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsServer::Start("localhost:0").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsServer::Start("127.0.0.1:0", 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto taken, MetricsServer::Start("127.0.0.1:0"));
  EXPECT_THAT(MetricsServer::Start("127.0.0.1:" + std::to_string(taken->port())).status(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(MetricsServer, ServesPagesBesideMetrics) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0"));
  server->Register(std::make_shared<CallbackCollectable>([] {
    MetricFamilies out;
    out.Gauge("t_g", "G.").Add({}, 1);
    return out.Take();
  }));
  server->RegisterPage("/", [](absl::string_view path, absl::string_view query) {
    return HttpReply{200, "text/html; charset=utf-8", "<p>index</p>"};
  });
  server->RegisterPage("/tasks", [](absl::string_view path, absl::string_view query) {
    if (path == "/tasks/missing") return HttpReply{404, "text/html; charset=utf-8", "<p>no</p>"};
    return HttpReply{200, "text/html; charset=utf-8",
                     absl::StrCat("<p>", path, "?", query, "</p>")};
  });

  const std::string index = HttpRequest(server->port(), "GET", "/");
  EXPECT_EQ(StatusLine(index), "HTTP/1.1 200 OK");
  EXPECT_NE(index.find("\r\nContent-Type: text/html; charset=utf-8\r\n"), std::string::npos);
  EXPECT_EQ(Body(index), "<p>index</p>");
  ExpectSafeHeaders(index);

  const std::string task = HttpRequest(server->port(), "GET", "/tasks/a-1?x=2");
  EXPECT_EQ(StatusLine(task), "HTTP/1.1 200 OK");
  EXPECT_EQ(Body(task), "<p>/tasks/a-1?x=2</p>");
  EXPECT_EQ(Body(HttpRequest(server->port(), "GET", "/tasks")), "<p>/tasks?</p>");

  const std::string missing = HttpRequest(server->port(), "GET", "/tasks/missing");
  EXPECT_EQ(StatusLine(missing), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(Body(missing), "<p>no</p>");
  ExpectSafeHeaders(missing);
  // Unknown paths: a prefix of a page's path is not the page, "/" is only "/".
  for (const char* path : {"/tasksx", "/other", "/index.html", "/metrics/x", "/favicon.ico"}) {
    const std::string r = HttpRequest(server->port(), "GET", path);
    EXPECT_EQ(StatusLine(r), "HTTP/1.1 404 Not Found") << path;
    ExpectSafeHeaders(r);
  }

  // /metrics is still the metrics, with the same headers.
  const std::string metrics = HttpRequest(server->port(), "GET", "/metrics");
  EXPECT_EQ(StatusLine(metrics), "HTTP/1.1 200 OK");
  EXPECT_NE(metrics.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(metrics.find("t_g 1"), std::string::npos) << metrics;
  ExpectSafeHeaders(metrics);

  // HEAD: the headers (the body's length) without the body.
  const std::string head = HttpRequest(server->port(), "HEAD", "/");
  EXPECT_EQ(StatusLine(head), "HTTP/1.1 200 OK");
  EXPECT_NE(head.find("\r\nContent-Length: 12\r\n"), std::string::npos) << head;
  EXPECT_EQ(Body(head), "");

  // Only GET and HEAD.
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    const std::string r = HttpRequest(server->port(), method, "/");
    EXPECT_EQ(StatusLine(r), "HTTP/1.1 405 Method Not Allowed") << method << ": " << r;
    EXPECT_NE(r.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << r;
    ExpectSafeHeaders(r);
  }
  EXPECT_EQ(StatusLine(HttpRequest(server->port(), "POST", "/metrics")),
            "HTTP/1.1 405 Method Not Allowed");
}

TEST(MetricsServer, ALaterRegistrationReplacesAPage) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0"));
  server->RegisterPage("/a", [](absl::string_view, absl::string_view) {
    return HttpReply{200, "text/html", "one"};
  });
  server->RegisterPage("/a/b", [](absl::string_view, absl::string_view) {
    return HttpReply{200, "text/html", "longest"};
  });
  EXPECT_EQ(Body(HttpGet(server->port(), "/a/x")), "one");
  EXPECT_EQ(Body(HttpGet(server->port(), "/a/b/c")), "longest");
  server->RegisterPage("/a", [](absl::string_view, absl::string_view) {
    return HttpReply{200, "text/html", "two"};
  });
  EXPECT_EQ(Body(HttpGet(server->port(), "/a")), "two");
}

}  // namespace
}  // namespace tandem
