// tandem-admin aggregator ...: an aggregator's operator API
// (proto/aggregator_admin.proto) from its operator's command line, over the
// aggregator's admin listener (mutual TLS with the operator's certificate).
//   aggregator provision --task=ID [--population=P] [--policy='TEXTPROTO']
//       the task's privacy terms (a PrivacyPolicy textproto; unset fields
//       take the aggregator's default policy)
//   aggregator list
//   aggregator retire --task=ID
// Thread safety: one call at a time (a command-line tool).
#ifndef TANDEM_SERVER_SERVICE_AGGREGATOR_COMMANDS_H_
#define TANDEM_SERVER_SERVICE_AGGREGATOR_COMMANDS_H_

#include <string>

#include "absl/status/status.h"
#include "base/grpc_credentials.h"

namespace tandem::server {

struct AggregatorCommandArgs {
  std::string admin;  // host:port of the aggregator's admin listener
  TlsFiles tls;
  std::string task;
  std::string population;
  std::string policy;  // PrivacyPolicy textproto
};

// Runs `verb`; prints what it did on stdout. INVALID_ARGUMENT for a missing
// flag, an unparsable --policy or an unknown verb; the aggregator's errors
// as they come.
absl::Status RunAggregatorCommand(const std::string& verb, const AggregatorCommandArgs& args);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_AGGREGATOR_COMMANDS_H_
