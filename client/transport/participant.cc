// Participant::Create and StepwiseParticipant::Create (public participant.h,
// stepwise_participant.h): the round runners over the gRPC transport, with
// the real clock and OpenSSL unless the environment brings its own.
#include "tandem/client/participant.h"

#include "base/clock.h"
#include "base/grpc_credentials.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "client/internal/assignment_checks.h"
#include "client/internal/round_runner.h"
#include "client/internal/stepwise_runner.h"
#include "client/transport/grpc_round_transport.h"
#include "tandem/client/stepwise_participant.h"

namespace tandem::client {
namespace {

// The gRPC transport the options describe; `clock` is not owned.
absl::StatusOr<std::unique_ptr<RoundTransport>> MakeTransport(const ParticipantOptions& options,
                                                              Clock* clock) {
  if (options.coordinator.empty())
    return absl::InvalidArgumentError("coordinator address is empty");
  TlsFiles tls;
  tls.insecure_plaintext = options.insecure_plaintext;
  tls.root_ca_path = options.tls_root_ca;
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                          MakeChannelCredentials(tls));
  RetryPolicy policy;
  policy.max_attempts = options.upload_attempts;
  policy.call_deadline = absl::Milliseconds(options.rpc_timeout_ms);
  // Fail closed (issue 34): over TLS the aggregators' identities are part of
  // the client's own configuration. Unpinned, it would send both shares to
  // whichever servers the coordinator names, and a CA that issues both
  // names (or the coordinator's own) would receive both.
  TANDEM_RETURN_IF_ERROR(ValidateTrustOptions(options));
  if (!options.insecure_plaintext && options.leader_name.empty()) {
    return absl::InvalidArgumentError(
        "with TLS, pin both aggregators' TLS identities (leader_name and helper_name; "
        "tandem-client --leader_name --helper_name): the coordinator must not choose who "
        "receives the shares");
  }
  return std::unique_ptr<RoundTransport>(std::make_unique<GrpcRoundTransport>(
      options.coordinator, std::move(creds), clock, policy, options.max_model_bytes,
      options.insecure_plaintext ? "" : options.coordinator_name));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Participant>> Participant::Create(const ParticipantOptions& options,
                                                                 const Environment& env) {
  Environment e = env;
  if (e.clock == nullptr) e.clock = RealClock::Default();
  if (e.random == nullptr) e.random = OpenSslRandom::Default();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<RoundTransport> transport,
                          MakeTransport(options, e.clock));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<RoundRunner> runner,
                          RoundRunner::Create(options, e, std::move(transport)));
  return std::unique_ptr<Participant>(std::move(runner));
}

absl::StatusOr<std::unique_ptr<StepwiseParticipant>> StepwiseParticipant::Create(
    const ParticipantOptions& options, const StepwiseEnvironment& env) {
  StepwiseEnvironment e = env;
  if (e.clock == nullptr) e.clock = RealClock::Default();
  if (e.random == nullptr) e.random = OpenSslRandom::Default();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<RoundTransport> transport,
                          MakeTransport(options, e.clock));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<StepwiseRunner> runner,
                          StepwiseRunner::Create(options, e, std::move(transport)));
  return std::unique_ptr<StepwiseParticipant>(std::move(runner));
}

}  // namespace tandem::client
