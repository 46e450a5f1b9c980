#include "base/grpc_policy.h"

#include <grpc/grpc.h>

namespace tandem::rpc {

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  const int initial_ms = static_cast<int>(absl::ToInt64Milliseconds(kReconnectInitial));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also gives each connection
  // attempt at least that long (20 s by default), and 100 ms would fail TLS
  // handshakes on a slow link or a loaded host (python test_participant and
  // test_gil caught it).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(kReconnectMax)));
  return args;
}

void ExclusiveListener(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

}  // namespace tandem::rpc
