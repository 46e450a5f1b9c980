#include "base/metrics_server.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>

#include <prometheus/exposer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(absl::string_view address,
                                                                    int threads) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address must be IPv4 host:port, got '", address, "'"));
  }
  const std::string host(address.substr(0, colon));
  in_addr parsed{};
  if (inet_pton(AF_INET, host.c_str(), &parsed) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host must be an IPv4 address, got '", host, "'"));
  }
  if (threads < 1) return absl::InvalidArgumentError("metrics server needs >= 1 thread");
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb: "host:port" binds that address only.
    exposer = std::make_unique<prometheus::Exposer>(std::string(address),
                                                    static_cast<size_t>(threads));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: no port for ", address));
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), ports.front()));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port)
    : exposer_(std::move(exposer)), port_(port) {}

// The exposer (and its threads) goes first: no scrape sees a collectable
// being destroyed.
MetricsServer::~MetricsServer() { exposer_.reset(); }

void MetricsServer::Register(std::shared_ptr<prometheus::Collectable> collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  exposer_->RegisterCollectable(collectable);  // holds a weak_ptr; we keep it alive
  collectables_.push_back(std::move(collectable));
}

MetricFamilies::Family& MetricFamilies::Family::Add(
    std::vector<std::pair<std::string, std::string>> labels, double value) {
  prometheus::MetricFamily& f = owner_->families_[index_];
  prometheus::ClientMetric m;
  for (auto& [name, v] : labels) m.label.push_back({std::move(name), std::move(v)});
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return *this;
}

MetricFamilies::Family MetricFamilies::New(std::string name, std::string help,
                                           prometheus::MetricType type) {
  // One family per name: a second call (e.g. the next task's series) adds
  // its samples to the first one's.
  for (size_t i = 0; i < families_.size(); ++i) {
    if (families_[i].name == name && families_[i].type == type) return Family(this, i);
  }
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  families_.push_back(std::move(f));
  return Family(this, families_.size() - 1);
}

MetricFamilies::Family MetricFamilies::Gauge(std::string name, std::string help) {
  return New(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

MetricFamilies::Family MetricFamilies::Counter(std::string name, std::string help) {
  return New(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

}  // namespace tandem
