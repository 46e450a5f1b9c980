// A minimal HTTP/1.0 endpoint for Prometheus scrapes: GET /metrics returns
// the text of `render` (text/plain; version=0.0.4); anything else 404.
// One request per connection, requests over 8 KiB or 2 s are dropped.
// Thread safety: Start/Stop from one thread; `render` is called on the
// server's own thread and must be thread-safe.
#ifndef TANDEM_SERVER_SERVICE_METRICS_HTTP_H_
#define TANDEM_SERVER_SERVICE_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tandem::server {

class MetricsHttpServer {
 public:
  // Binds host:port (port 0 = any free port). INVALID_ARGUMENT for a bad
  // address, UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::function<std::string()> render);
  ~MetricsHttpServer();  // stops and joins
  int port() const { return port_; }

 private:
  MetricsHttpServer(int fd, int port, std::function<std::string()> render);
  void Serve();
  int fd_;
  int port_;
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_METRICS_HTTP_H_
