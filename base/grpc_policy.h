// The deadlines and the reconnect schedule of every gRPC call tandem's
// daemons, devices and tools make, in one place (issue 37: "timeouts and
// retries get defaults a user does not have to tune, bounded, with backoff
// and jitter"). Each call site takes its deadline from here; every channel
// starts from ChannelArgs().
//
// Reconnect backoff: gRPC's default is 1 s for the first retry, growing
// x1.6 up to 120 s, with +-20 % jitter, so after a partition of a minute a
// daemon could wait two more minutes to use the healed link. tandem's
// links are few and long-lived (leader -> helper, coordinator ->
// aggregators, a device's few calls), so reconnect attempts are cheap:
// first after 100 ms, growing x1.6 (gRPC's multiplier and jitter) up to 5 s.
// A healed link is used within 5 s at most (tests/faults measure it). Each
// connection attempt keeps gRPC's own 20 s minimum, so slow links and TLS
// handshakes on a loaded host still connect.
//
// Pure values and a function; thread-safe.
#ifndef TANDEM_BASE_GRPC_POLICY_H_
#define TANDEM_BASE_GRPC_POLICY_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/time/time.h"

namespace tandem::rpc {

// Leader -> helper (Verify, CommitAcceptedSet): a verification pass waits at
// most this long on a hung helper before it fails and is retried.
inline constexpr absl::Duration kPeerCallDeadline = absl::Seconds(60);
// Coordinator -> aggregators (OpenRound, Finalize, Status, AbandonRound):
// Finalize drives the leader's last verification pass, which may wait one
// kPeerCallDeadline on the helper.
inline constexpr absl::Duration kCollectorCallDeadline = absl::Seconds(120);
// A device's calls (check-in, download, uploads, done); uploads are retried
// with their own bounded backoff (client/transport/grpc_uploader.h).
inline constexpr absl::Duration kDeviceCallDeadline = absl::Seconds(30);
// Operator tools (tandem-status, tandem-admin) and the daemons' calls to a
// worker.
inline constexpr absl::Duration kOperatorCallDeadline = absl::Seconds(30);

inline constexpr absl::Duration kReconnectInitial = absl::Milliseconds(100);
inline constexpr absl::Duration kReconnectMax = absl::Seconds(5);

// Channel arguments with the reconnect backoff above; callers add their
// own (message sizes, TLS target name).
grpc::ChannelArguments ChannelArgs();

// Every daemon listener's builder, before BuildAndStart: the port is the
// daemon's alone. gRPC sets SO_REUSEPORT on Linux by default, so a second
// daemon started on a port in use (a second coordinator, a stale one still
// running, another test's) bound it too, and the kernel split new
// connections between the two processes: devices reached whichever answered,
// each with its own rounds and state. Now the second fails to start
// (UNAVAILABLE "cannot listen on ...").
void ExclusiveListener(grpc::ServerBuilder& builder);

}  // namespace tandem::rpc

#endif  // TANDEM_BASE_GRPC_POLICY_H_
