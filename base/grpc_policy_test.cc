#include "base/grpc_policy.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem::rpc {
namespace {

// A server with no methods (gRPC builds none without a service); the
// service outlives the server it is registered with.
struct Listener {
  grpc::CallbackGenericService no_methods;
  std::unique_ptr<grpc::Server> server;
  int port = -1;
};
std::unique_ptr<Listener> Listen(const std::string& address) {
  auto l = std::make_unique<Listener>();
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&l->no_methods);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &l->port);
  ExclusiveListener(builder);
  l->server = builder.BuildAndStart();
  return l;
}

TEST(ExclusiveListener, ASecondServerCannotBindATakenPort) {
  std::unique_ptr<Listener> first = Listen("127.0.0.1:0");
  ASSERT_NE(first->server, nullptr);
  ASSERT_GT(first->port, 0);
  const std::string taken = absl::StrCat("127.0.0.1:", first->port);
  std::unique_ptr<Listener> second = Listen(taken);
  EXPECT_TRUE(second->server == nullptr || second->port == 0)
      << "both servers hold " << first->port;
  if (second->server != nullptr) second->server->Shutdown();
  // Once the port is free again, a server binds it.
  first->server->Shutdown();
  first.reset();
  std::unique_ptr<Listener> third = Listen(taken);
  ASSERT_NE(third->server, nullptr);
  EXPECT_EQ(absl::StrCat("127.0.0.1:", third->port), taken);
  third->server->Shutdown();
}

}  // namespace
}  // namespace tandem::rpc
