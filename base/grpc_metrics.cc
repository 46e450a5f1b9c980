#include "base/grpc_metrics.h"

#include <chrono>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

namespace tandem {
namespace {

using grpc::experimental::InterceptionHookPoints;

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "OTHER";
  }
}

struct Families {
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>* handled;
  prometheus::Family<prometheus::Histogram>* seconds;
};

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(const Families* f, const std::string& method) : f_(f) {
    // "/package.Service/Method"
    const size_t slash = method.rfind('/');
    service_ = slash == std::string::npos || slash == 0 ? "" : method.substr(1, slash - 1);
    method_ = slash == std::string::npos ? method : method.substr(slash + 1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      start_ = std::chrono::steady_clock::now();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      f_->handled
          ->Add({{"grpc_service", service_},
                 {"grpc_method", method_},
                 {"code", CodeName(status.error_code())}})
          .Increment();
      static const prometheus::Histogram::BucketBoundaries kBuckets = {
          0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
      f_->seconds->Add({{"grpc_service", service_}, {"grpc_method", method_}}, kBuckets)
          .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
                       .count());
    }
    methods->Proceed();
  }

 private:
  const Families* f_;
  std::string service_;
  std::string method_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::shared_ptr<prometheus::Registry> registry) {
    f_.registry = std::move(registry);
    f_.handled = &prometheus::BuildCounter()
                      .Name("tandem_rpc_server_handled_total")
                      .Help("gRPC calls this server finished, by method and status code.")
                      .Register(*f_.registry);
    f_.seconds = &prometheus::BuildHistogram()
                      .Name("tandem_rpc_server_handling_seconds")
                      .Help("Seconds from a call's arrival to its status, by method.")
                      .Register(*f_.registry);
  }
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(&f_, info->method());
  }

 private:
  Families f_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(std::shared_ptr<prometheus::Registry> registry) {
  return std::make_unique<Factory>(std::move(registry));
}

}  // namespace tandem
