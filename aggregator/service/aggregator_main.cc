// tandem-aggregator: one of the two non-colluding aggregation servers.
//   tandem-aggregator --config=deploy/config/leader.textproto
//   tandem-aggregator --role=helper --listen=127.0.0.1:7002 --state_dir=/tmp/h
//       --insecure_plaintext --allow_unticketed_uploads --task=default
// Flags override the config file. Prints "metrics on PORT" (with a metrics
// listener), "collector on PORT", on the helper "peer on PORT", then
// "listening on PORT" (uploads) once serving;
// SIGINT/SIGTERM shut it down cleanly.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "aggregator/service/daemon.h"
#include "base/large_buffers.h"
#include "base/logging.h"
#include "base/shutdown_signals.h"
#include "google/protobuf/text_format.h"

ABSL_FLAG(std::string, config, "", "AggregatorConfig textproto file");
ABSL_FLAG(std::string, role, "", "leader or helper (overrides the config)");
ABSL_FLAG(std::string, listen, "", "upload listener host:port, public, server TLS (port 0 = any)");
ABSL_FLAG(std::string, collector_listen, "",
          "collector listener host:port, mutual TLS, coordinator identities only");
ABSL_FLAG(std::string, peer_listen, "",
          "helper only: peer listener host:port, mutual TLS, leader identities only");
ABSL_FLAG(std::string, peer, "", "leader only: the helper's peer listener host:port");
ABSL_FLAG(std::string, peer_name, "", "leader only: the helper's TLS identity (server name)");
ABSL_FLAG(std::vector<std::string>, coordinator_identity, {},
          "certificate identities (DNS SAN or CN) allowed on the collector listener");
ABSL_FLAG(std::vector<std::string>, leader_identity, {},
          "helper only: certificate identities allowed on the peer listener");
ABSL_FLAG(std::string, coordinator_key, "",
          "PEM Ed25519 public key of the coordinator; uploads need a ticket it signed. "
          "Rotation: new.pub,old.pub (tickets of either verify; drop old.pub once its "
          "tickets have expired)");
ABSL_FLAG(bool, segment_share_files, false,
          "keep report shares in append-only segment files indexed by SQLite (faster ingest)");
ABSL_FLAG(bool, allow_unbound_tickets, false,
          "accept coordinator tickets that name no device key (uploads then carry no device "
          "signature; older coordinators and tests only)");
ABSL_FLAG(bool, allow_unticketed_uploads, false,
          "accept uploads without a coordinator ticket (tests and local runs only)");
ABSL_FLAG(std::vector<std::string>, task, {},
          "provisioned tasks, ID or ID@POPULATION, comma separated (added to the config's "
          "task_policies with the default policy); OpenRound for any other task is refused");
ABSL_FLAG(bool, allow_unprovisioned_tasks, false,
          "open rounds for any task id the coordinator names, each a population of its own "
          "(tests of the bare protocol only)");
ABSL_FLAG(std::string, policy, "",
          "PrivacyPolicy textproto for the default policy (overrides the config's fields)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this aggregator");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of this aggregator");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots verifying the callers of the internal listeners");
ABSL_FLAG(std::string, state_dir, "", "directory of the SQLite state files");
ABSL_FLAG(std::string, metrics_listen, "",
          "Prometheus /metrics on this IPv4 host:port, plain HTTP (overrides the config)");
ABSL_FLAG(std::string, postgres_conninfo, "",
          "libpq connection string of a PostgreSQL database for the state (overrides the config)");
ABSL_FLAG(std::string, replica_id, "",
          "with a PostgreSQL store: this replica's stable id, e.g. the pod name (overrides the config)");
ABSL_FLAG(int, max_clock_skew_s, 0,
          "how far past a ticket's expiry or a round's deadline (the coordinator's clock) "
          "uploads are still accepted; 0: the config's max_clock_skew_ms (default 300 s), "
          "-1: none");
ABSL_FLAG(bool, insecure_plaintext, false, "serve without TLS (local runs only)");
ABSL_FLAG(int, verbosity, 0, "TANDEM_VLOG level");
ABSL_FLAG(bool, check_config, false, "validate the configuration, print the result and exit");
ABSL_FLAG(std::string, admin_listen, "",
          "host:port of the operator API (tandem-admin aggregator provision|list|retire); "
          "empty: none");
ABSL_FLAG(std::string, admin_ca, "",
          "PEM roots verifying the operators' certificates (default: --tls_ca)");
ABSL_FLAG(std::vector<std::string>, operator_identity, {},
          "certificate identities (DNS SANs) that may call the operator API");
ABSL_FLAG(absl::Duration, verify_interval, absl::Milliseconds(25),
          "how often the leader verifies the uploads pending since its last pass with the "
          "helper (and either server checkpoints an idle round's partial sum); shorter leaves "
          "less to verify when a round is finalized, at a few idle wake-ups a second");

int main(int argc, char** argv) {
  tandem::TuneAllocatorForLargeBuffers();  // report shares churn ~134 KB buffers
  absl::SetProgramUsageMessage("tandem aggregation server (leader or helper)");
  // State files (SQLite databases, WAL, segments) readable by this user only.
  ::umask(077);
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
  auto set_if = [](const std::string& v, std::string* field) {
    if (!v.empty()) *field = v;
  };
  set_if(absl::GetFlag(FLAGS_collector_listen), config.mutable_collector_listen_address());
  set_if(absl::GetFlag(FLAGS_peer_listen), config.mutable_peer_listen_address());
  set_if(absl::GetFlag(FLAGS_peer_name), config.mutable_peer()->mutable_server_name());
  set_if(absl::GetFlag(FLAGS_coordinator_key), config.mutable_coordinator_public_key_path());
  set_if(absl::GetFlag(FLAGS_tls_cert), config.mutable_tls()->mutable_cert_chain_path());
  set_if(absl::GetFlag(FLAGS_tls_key), config.mutable_tls()->mutable_private_key_path());
  set_if(absl::GetFlag(FLAGS_tls_ca), config.mutable_tls()->mutable_root_ca_path());
  set_if(absl::GetFlag(FLAGS_metrics_listen), config.mutable_metrics_listen_address());
  set_if(absl::GetFlag(FLAGS_postgres_conninfo), config.mutable_postgres_conninfo());
  set_if(absl::GetFlag(FLAGS_replica_id), config.mutable_replica_id());
  for (const std::string& id : absl::GetFlag(FLAGS_coordinator_identity)) {
    config.add_coordinator_identities(id);
  }
  for (const std::string& id : absl::GetFlag(FLAGS_leader_identity)) config.add_leader_identities(id);
  if (absl::GetFlag(FLAGS_allow_unticketed_uploads)) config.set_allow_unticketed_uploads(true);
  if (absl::GetFlag(FLAGS_allow_unbound_tickets)) config.set_allow_unbound_tickets(true);
  if (absl::GetFlag(FLAGS_segment_share_files)) config.set_segment_share_files(true);
  if (const int skew = absl::GetFlag(FLAGS_max_clock_skew_s); skew != 0) {
    config.set_max_clock_skew_ms(skew < 0 ? -1 : int64_t{skew} * 1000);
  }
  if (absl::GetFlag(FLAGS_allow_unprovisioned_tasks)) config.set_allow_unprovisioned_tasks(true);
  for (const std::string& task : absl::GetFlag(FLAGS_task)) {
    *config.add_task_policies() = tandem::aggregator::TaskPolicyFromFlag(task);
  }
  if (const std::string policy = absl::GetFlag(FLAGS_policy); !policy.empty()) {
    tandem::proto::PrivacyPolicy overlay;
    if (!google::protobuf::TextFormat::ParseFromString(policy, &overlay)) {
      std::fprintf(stderr, "cannot parse --policy '%s'\n", policy.c_str());
      return 2;
    }
    config.mutable_default_policy()->MergeFrom(overlay);
  }

  if (absl::GetFlag(FLAGS_check_config)) {
    const absl::Status s = tandem::aggregator::ValidateConfig(config);
    std::printf("%s\n", s.ok() ? "config ok" : s.ToString().c_str());
    return s.ok() ? 0 : 2;
  }

  const tandem::ShutdownSignals signals;  // before any thread starts

  tandem::proto::AggregatorAdminConfig admin;
  admin.set_listen_address(absl::GetFlag(FLAGS_admin_listen));
  admin.set_operator_ca_path(absl::GetFlag(FLAGS_admin_ca));
  for (const std::string& id : absl::GetFlag(FLAGS_operator_identity)) {
    admin.add_operator_identities(id);
  }
  if (absl::GetFlag(FLAGS_verify_interval) <= absl::ZeroDuration()) {
    std::fprintf(stderr, "tandem-aggregator: --verify_interval must be positive\n");
    return 1;
  }
  auto daemon = tandem::aggregator::AggregatorDaemon::Start(
      config, tandem::RealClock::Default(), tandem::OpenSslRandom::Default(),
      absl::GetFlag(FLAGS_verify_interval), admin);
  if (!daemon.ok()) {
    std::fprintf(stderr, "tandem-aggregator: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  if ((*daemon)->metrics_port() > 0) std::printf("metrics on %d\n", (*daemon)->metrics_port());
  if ((*daemon)->admin_port() > 0) std::printf("admin on %d\n", (*daemon)->admin_port());
  std::printf("collector on %d\n", (*daemon)->collector_port());
  if (config.role() == "helper") std::printf("peer on %d\n", (*daemon)->peer_port());
  std::printf("listening on %d\n", (*daemon)->port());
  std::fflush(stdout);
  const int sig = signals.Wait([&] {
    const absl::Status s = (*daemon)->ReloadTls();
    TANDEM_LOG(INFO) << "SIGHUP: certificates " << (s.ok() ? "reloaded" : s.ToString());
  });
  TANDEM_LOG(INFO) << "signal " << sig << ": shutting down";
  (*daemon)->Shutdown();
  return 0;
}
