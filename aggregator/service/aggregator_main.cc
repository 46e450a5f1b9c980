// tandem-aggregator: one of the two non-colluding aggregation servers.
//   tandem-aggregator --config=deploy/config/leader.textproto
//   tandem-aggregator --role=helper --listen=127.0.0.1:7002 --state_dir=/tmp/h --insecure_plaintext
// Flags override the config file. Prints "listening on PORT" once serving;
// SIGINT/SIGTERM shut it down cleanly.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "aggregator/service/daemon.h"
#include "base/logging.h"
#include "base/shutdown_signals.h"
#include "google/protobuf/text_format.h"

ABSL_FLAG(std::string, config, "", "AggregatorConfig textproto file");
ABSL_FLAG(std::string, role, "", "leader or helper (overrides the config)");
ABSL_FLAG(std::string, listen, "", "listen address host:port (port 0 = any)");
ABSL_FLAG(std::string, peer, "", "leader only: helper address host:port");
ABSL_FLAG(std::string, state_dir, "", "directory of the SQLite state files");
ABSL_FLAG(bool, insecure_plaintext, false, "serve without TLS (local runs only)");
ABSL_FLAG(int, verbosity, 0, "TANDEM_VLOG level");
ABSL_FLAG(bool, check_config, false, "validate the configuration, print the result and exit");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tandem aggregation server (leader or helper)");
  absl::ParseCommandLine(argc, argv);
  tandem::SetVerbosity(absl::GetFlag(FLAGS_verbosity));

  tandem::proto::AggregatorConfig config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in || !google::protobuf::TextFormat::ParseFromString(text.str(), &config)) {
      std::fprintf(stderr, "cannot parse config %s\n", path.c_str());
      return 2;
    }
  }
  if (!absl::GetFlag(FLAGS_role).empty()) config.set_role(absl::GetFlag(FLAGS_role));
  if (!absl::GetFlag(FLAGS_listen).empty()) config.set_listen_address(absl::GetFlag(FLAGS_listen));
  if (!absl::GetFlag(FLAGS_peer).empty()) config.mutable_peer()->set_address(absl::GetFlag(FLAGS_peer));
  if (!absl::GetFlag(FLAGS_state_dir).empty()) config.set_state_path(absl::GetFlag(FLAGS_state_dir));
  if (absl::GetFlag(FLAGS_insecure_plaintext)) config.mutable_tls()->set_insecure_plaintext(true);

  if (absl::GetFlag(FLAGS_check_config)) {
    const absl::Status s = tandem::aggregator::ValidateConfig(config);
    std::printf("%s\n", s.ok() ? "config ok" : s.ToString().c_str());
    return s.ok() ? 0 : 2;
  }

  const tandem::ShutdownSignals signals;  // before any thread starts

  auto daemon = tandem::aggregator::AggregatorDaemon::Start(
      config, tandem::RealClock::Default(), tandem::OpenSslRandom::Default());
  if (!daemon.ok()) {
    std::fprintf(stderr, "tandem-aggregator: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  std::printf("listening on %d\n", (*daemon)->port());
  std::fflush(stdout);
  const int sig = signals.Wait();
  TANDEM_LOG(INFO) << "signal " << sig << ": shutting down";
  (*daemon)->Shutdown();
  return 0;
}
