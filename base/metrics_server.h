// Prometheus /metrics for the daemons, through prometheus-cpp (Debian's
// prometheus-cpp-dev): its Exposer serves GET /metrics in the text format
// (0.0.4) from civetweb worker threads, and the daemons register
// prometheus::Registry objects (counters and histograms they update as
// events happen) and CallbackCollectables (values read from their state at
// scrape time).
//
// The endpoint is plain HTTP without authentication: it carries aggregate
// counters only (never report data or keys). Bind it to loopback, or to an
// address only the monitoring network reaches.
//
// Ownership: the server keeps every registered collectable alive until it
// is destroyed. Thread safety: Register and port are thread-safe; scrapes
// run concurrently on the server's threads, so collectables must be
// thread-safe (Registry is; a CallbackCollectable's callback must be).
#ifndef TANDEM_BASE_METRICS_SERVER_H_
#define TANDEM_BASE_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace tandem {

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

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port);

  std::mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;  // guarded by mu_
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
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
