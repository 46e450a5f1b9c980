// tandem-admin task ...: the coordinator's task API (proto/task_admin.proto)
// from the operator's command line, over the admin listener (mutual TLS
// with the operator's certificate).
//   task create --spec=FILE     the document (textproto); an opaque model's
//                               weights_file (relative to the spec) is sent
//   task list | show | pause | resume | delete --task=ID
//   task export --task=ID [--version=N] --out=model.safetensors
// Thread safety: one call at a time (a command-line tool).
#ifndef TANDEM_SERVER_SERVICE_TASK_COMMANDS_H_
#define TANDEM_SERVER_SERVICE_TASK_COMMANDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "base/grpc_credentials.h"

namespace tandem::server {

struct TaskCommandArgs {
  std::string admin;  // host:port of the admin listener
  TlsFiles tls;
  std::string task;
  std::string spec_path;
  uint64_t version = 0;
  std::string out;
};

// Runs `verb`; prints what it did on stdout. INVALID_ARGUMENT for a missing
// flag or unknown verb; the coordinator's errors as they come.
absl::Status RunTaskCommand(const std::string& verb, const TaskCommandArgs& args);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_TASK_COMMANDS_H_
