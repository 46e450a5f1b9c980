// MetricsServer over loopback: registry counters and scrape-time families
// on /metrics, several scrapes at once, the bound port with port 0, and the
// error codes of bad or taken addresses.
#include "base/metrics_server.h"

#include <atomic>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "base/testing/http_get.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::tandem::testing::HttpGet;
using ::tandem::testing::StatusIs;

TEST(MetricsServer, ServesRegistriesAndCallbackFamilies) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0"));
  ASSERT_GT(server->port(), 0);
  auto registry = std::make_shared<prometheus::Registry>();
  auto& uploads = prometheus::BuildCounter().Name("t_uploads_total").Help("Uploads.")
                      .Register(*registry);
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

}  // namespace
}  // namespace tandem
