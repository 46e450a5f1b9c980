// Participant::Create (public participant.h): the round runner over the
// gRPC transport, with the real clock and OpenSSL unless the environment
// brings its own.
#include "base/clock.h"
#include "base/grpc_credentials.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/round_runner.h"
#include "client/transport/grpc_round_transport.h"
#include "tandem/client/participant.h"

namespace tandem::client {

absl::StatusOr<std::unique_ptr<Participant>> Participant::Create(const ParticipantOptions& options,
                                                                 const Environment& env) {
  if (options.coordinator.empty()) return absl::InvalidArgumentError("coordinator address is empty");
  TlsFiles tls;
  tls.insecure_plaintext = options.insecure_plaintext;
  tls.root_ca_path = options.tls_root_ca;
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                          MakeChannelCredentials(tls));
  Environment e = env;
  if (e.clock == nullptr) e.clock = RealClock::Default();
  if (e.random == nullptr) e.random = OpenSslRandom::Default();
  RetryPolicy policy;
  policy.max_attempts = options.upload_attempts;
  policy.call_deadline = absl::Milliseconds(options.rpc_timeout_ms);
  auto transport = std::make_unique<GrpcRoundTransport>(options.coordinator, std::move(creds),
                                                        e.clock, policy, options.max_model_bytes);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<RoundRunner> runner,
                          RoundRunner::Create(options, e, std::move(transport)));
  return std::unique_ptr<Participant>(std::move(runner));
}

}  // namespace tandem::client
