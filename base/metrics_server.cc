#include "base/metrics_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <prometheus/text_serializer.h>

#include <mutex>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"

namespace tandem {
namespace {

// Nothing but inline styles and data: images: no script, no remote loads,
// not framed, no forms or <base>.
constexpr char kSecurityHeaders[] =
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n";

HttpReply PlainText(int status, std::string body) {
  return HttpReply{status, "text/plain; charset=utf-8", std::move(body)};
}

// civetweb's own messages (a failed bind, a client gone mid-write): logged
// as ours, never on its stderr.
int LogCivetweb(const mg_connection*, const char* message) {
  TANDEM_LOG(WARNING) << "metrics server: " << message;
  return 1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(absl::string_view address,
                                                                    int threads) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
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
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });  // once per process, never undone

  std::unique_ptr<MetricsServer> server(new MetricsServer());
  // civetweb: "host:port" binds that address only; no document_root, so it
  // serves no files, only what Handle answers.
  const std::string listen = absl::StrCat(host, ":", port);
  const std::string num_threads = absl::StrCat(threads);
  const char* config[] = {"listening_ports",
                          listen.c_str(),
                          "num_threads",
                          num_threads.c_str(),
                          "enable_keep_alive",
                          "no",
                          "request_timeout_ms",
                          "10000",
                          nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &LogCivetweb;
  mg_init_data init_data{&callbacks, nullptr, config};
  unsigned code = 0;
  char text[256] = {0};
  mg_error_data error{&code, text, sizeof(text)};
  server->ctx_ = mg_start2(&init_data, &error);
  if (server->ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ",
                                               text[0] != 0 ? text : "civetweb failed to start"));
  }
  // One handler for every path ("**" matches all): routing, methods and
  // headers are ours.
  mg_set_request_handler(server->ctx_, "**", &MetricsServer::Handle, server.get());
  mg_server_port ports[4] = {};
  const int n = mg_get_server_ports(server->ctx_, 4, ports);
  if (n < 1 || ports[0].port <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics: no port for ", address));
  }
  server->port_ = ports[0].port;
  return server;
}

// civetweb's threads are joined first: no request sees a collectable or
// page handler being destroyed.
MetricsServer::~MetricsServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

void MetricsServer::Register(std::shared_ptr<prometheus::Collectable> collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  collectables_.push_back(std::move(collectable));
}

void MetricsServer::RegisterPage(std::string path, PageHandler handler) {
  auto shared = std::make_shared<const PageHandler>(std::move(handler));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, h] : pages_) {
    if (p == path) {
      h = std::move(shared);
      return;
    }
  }
  pages_.emplace_back(std::move(path), std::move(shared));
}

std::string MetricsServer::Scrape() {
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectables = collectables_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    std::vector<prometheus::MetricFamily> f = c->Collect();
    families.insert(families.end(), std::make_move_iterator(f.begin()),
                    std::make_move_iterator(f.end()));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

HttpReply MetricsServer::Route(absl::string_view path, absl::string_view query) {
  if (path == "/metrics") {
    return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", Scrape()};
  }
  std::shared_ptr<const PageHandler> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = 0;
    for (const auto& [p, h] : pages_) {
      const bool match = path == p || (p != "/" && absl::StartsWith(path, p) &&
                                       path.size() > p.size() && path[p.size()] == '/');
      if (match && p.size() > best) {
        best = p.size();
        handler = h;
      }
    }
  }
  if (handler == nullptr) return PlainText(404, "not found\n");
  return (*handler)(path, query);
}

int MetricsServer::Handle(mg_connection* conn, void* self) {
  auto* server = static_cast<MetricsServer*>(self);
  const mg_request_info* info = mg_get_request_info(conn);
  const absl::string_view method =
      info != nullptr && info->request_method != nullptr ? info->request_method : "";
  const bool head = method == "HEAD";
  HttpReply reply;
  std::string extra;
  if (info == nullptr || info->local_uri == nullptr) {
    reply = PlainText(400, "bad request\n");
  } else if (method != "GET" && !head) {
    reply = PlainText(405, "only GET and HEAD\n");
    extra = "Allow: GET, HEAD\r\n";
  } else {
    reply = server->Route(info->local_uri, info->query_string != nullptr ? info->query_string : "");
  }
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", reply.status, " ", mg_get_response_code_text(conn, reply.status),
      "\r\nContent-Type: ", reply.content_type, "\r\nContent-Length: ", reply.body.size(), "\r\n",
      kSecurityHeaders, extra, "Connection: close\r\n\r\n");
  mg_write(conn, header.data(), header.size());
  if (!head && !reply.body.empty()) mg_write(conn, reply.body.data(), reply.body.size());
  return reply.status;
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
