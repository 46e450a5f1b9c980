// Prometheus counters of a gRPC server's calls, as a server interceptor
// (gRPC's experimental interceptor API, stable in Debian 12's gRPC 1.51):
//   tandem_rpc_server_handled_total{grpc_service, grpc_method, code}
//   tandem_rpc_server_handling_seconds{grpc_service, grpc_method} (histogram)
// Only methods of the services registered on the server reach an
// interceptor, so the label set is bounded by the server's own API.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> f;
//   f.push_back(MakeRpcMetricsInterceptorFactory(registry));
//   builder.experimental().SetInterceptorCreators(std::move(f));
//   metrics_server->Register(registry);
// Ownership: the factory keeps the registry alive. Thread-safe (interceptors
// are per call; prometheus-cpp metrics are thread-safe).
#ifndef TANDEM_BASE_GRPC_METRICS_H_
#define TANDEM_BASE_GRPC_METRICS_H_

#include <memory>

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/registry.h>

namespace tandem {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(std::shared_ptr<prometheus::Registry> registry);

}  // namespace tandem

#endif  // TANDEM_BASE_GRPC_METRICS_H_
