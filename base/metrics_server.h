// Prometheus /metrics for the daemons, and small HTML pages beside it on the
// same port (the coordinator's live dashboard), served by civetweb (Debian's
// libcivetweb, which prometheus-cpp-dev depends on) through its C API on
// civetweb worker threads. The daemons register prometheus::Registry
// objects (counters and histograms they update as events happen) and
// CallbackCollectables (values read from their state at scrape time); GET
// /metrics serializes them in the text format (0.0.4) with prometheus-cpp's
// TextSerializer.
//
// Only GET and HEAD are served (405 otherwise), only /metrics and the
// registered pages (404 otherwise). Every response carries
// Cache-Control: no-store, X-Content-Type-Options: nosniff and a
// Content-Security-Policy that allows nothing but inline styles and data:
// images (no script, no frames, no remote loads), and closes its
// connection.
//
// The endpoint is plain HTTP without authentication: it carries aggregate
// counters only (never report data or keys), and pages must show no more.
// Bind it to loopback, or to an address only the monitoring network reaches.
//
// Ownership: the server keeps every registered collectable and page handler
// alive until it is destroyed; the destructor stops the threads first.
// Thread safety: Register, RegisterPage and port are thread-safe; requests
// run concurrently on the server's threads, so collectables and page
// handlers must be thread-safe (Registry is; a CallbackCollectable's
// callback must be).
#ifndef TANDEM_BASE_METRICS_SERVER_H_
#define TANDEM_BASE_METRICS_SERVER_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct mg_connection;  // civetweb's
struct mg_context;

namespace tandem {

// What a page handler answers: `status` (200, 404, ...) with `body` of
// `content_type`. The server adds the headers every response carries.
struct HttpReply {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
};

// Answers a GET (or HEAD) of `path` (URL-decoded, without the query) with
// `query` (the raw part after '?', empty when none). Runs on a server
// thread; must be thread-safe and must not block for long.
using PageHandler = std::function<HttpReply(absl::string_view path, absl::string_view query)>;

class MetricsServer {
 public:
  // Serves /metrics on `address`, an IPv4 "host:port" (port 0 = any free
  // port), with `threads` civetweb worker threads. INVALID_ARGUMENT for a
  // malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(absl::string_view address,
                                                              int threads = 2);
  ~MetricsServer();  // stops serving and joins the threads

  int port() const { return port_; }
  // Adds `collectable` to what /metrics returns.
  void Register(std::shared_ptr<prometheus::Collectable> collectable);
  // Serves `path` (e.g. "/tasks", starting with '/') and every path below
  // it ("/tasks/a") with `handler`; "/" serves only "/". The longest
  // registered path that matches wins; /metrics stays the metrics'. A
  // second registration of a path replaces the first.
  void RegisterPage(std::string path, PageHandler handler);

 private:
  MetricsServer() = default;
  // civetweb's request handler (`self` is the server).
  static int Handle(mg_connection* conn, void* self);
  // The reply to a GET of `path`.
  HttpReply Route(absl::string_view path, absl::string_view query);
  // The text format of every registered collectable.
  std::string Scrape();

  std::mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;             // guarded by mu_
  std::vector<std::pair<std::string, std::shared_ptr<const PageHandler>>> pages_;  // guarded by mu_
  mg_context* ctx_ = nullptr;  // owned: mg_stop in the destructor
  int port_ = 0;
};

// A collectable whose families `collect` builds at each scrape (gauges and
// counters that mirror state kept elsewhere).
class CallbackCollectable final : public prometheus::Collectable {
 public:
  explicit CallbackCollectable(std::function<std::vector<prometheus::MetricFamily>()> collect)
      : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  std::function<std::vector<prometheus::MetricFamily>()> collect_;
};

// Builds families for CallbackCollectable:
//   MetricFamilies out;
//   out.Gauge("tandem_x", "help").Add({{"task", id}}, 3.0);
class MetricFamilies {
 public:
  class Family {
   public:
    // One sample with these labels (name, value pairs).
    Family& Add(std::vector<std::pair<std::string, std::string>> labels, double value);

   private:
    friend class MetricFamilies;
    Family(MetricFamilies* owner, size_t index) : owner_(owner), index_(index) {}
    MetricFamilies* owner_;
    size_t index_;  // stable while families_ grows
  };
  // The family `name` (created on first use; later calls with the same
  // name and type return it, so that samples of several sources share it).
  Family Gauge(std::string name, std::string help);
  Family Counter(std::string name, std::string help);
  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  Family New(std::string name, std::string help, prometheus::MetricType type);
  std::vector<prometheus::MetricFamily> families_;
};

}  // namespace tandem

#endif  // TANDEM_BASE_METRICS_SERVER_H_
