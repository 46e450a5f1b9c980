// ValidateConfig and the receive limits of tandem-aggregator (daemon.h).
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "aggregator/core/policy.h"
#include "aggregator/core/postgres_store_factory.h"
#include "aggregator/service/daemon.h"
#include "base/net_address.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

// Two listen addresses that cannot both be bound (port 0 = any free port).
bool SameListener(absl::string_view a, absl::string_view b) {
  return a == b && !absl::EndsWith(a, ":0");
}

absl::Status RequireLoopback(absl::string_view field, absl::string_view address) {
  if (address.empty() || IsLoopbackAddress(address)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tls.insecure_plaintext is refused for the non-loopback ", field, " '",
                   address, "': plaintext is for local runs only"));
}

}  // namespace

int64_t UploadLimitBytes(uint64_t max_sent_values) {
  return static_cast<int64_t>(max_sent_values) * 17 + (int64_t{1} << 20);
}

proto::TaskPolicy TaskPolicyFromFlag(absl::string_view task) {
  proto::TaskPolicy t;
  const size_t at = task.find('@');
  t.set_task_id(std::string(task.substr(0, at)));
  if (at != absl::string_view::npos) t.set_population(std::string(task.substr(at + 1)));
  return t;
}

absl::Status ValidateConfig(const proto::AggregatorConfig& config) {
  TANDEM_ASSIGN_OR_RETURN(Role role, ParseRole(config.role()));
  if (config.listen_address().empty()) {
    return absl::InvalidArgumentError("listen_address is required");
  }
  if (config.state_path().empty()) return absl::InvalidArgumentError("state_path is required");
  if (!config.postgres_conninfo().empty()) {
    if (config.segment_share_files() || config.relaxed_durability()) {
      return absl::InvalidArgumentError(
          "postgres_conninfo excludes segment_share_files and relaxed_durability (SQLite "
          "settings; PostgreSQL's durability is the server's synchronous_commit)");
    }
    if (!PostgresStoreBuiltIn()) {
      return absl::InvalidArgumentError(
          "postgres_conninfo: this binary was built without the PostgreSQL report store");
    }
  }
  if (!config.replica_id().empty()) {
    if (config.postgres_conninfo().empty()) {
      return absl::InvalidArgumentError(
          "replica_id needs postgres_conninfo: replicas share one PostgreSQL database");
    }
    TANDEM_RETURN_IF_ERROR(ValidateReplicaId(config.replica_id()));
  }
  if (config.idle_checkpoint_ms() < -1 || config.idle_checkpoint_ms() > 3600000) {
    return absl::InvalidArgumentError("idle_checkpoint_ms must be -1 (never), 0 (default 1000) "
                                      "or at most 3600000");
  }
  if (config.max_clock_skew_ms() < -1 || config.max_clock_skew_ms() > 3600000) {
    return absl::InvalidArgumentError(
        "max_clock_skew_ms must be -1 (none), 0 (default 300000) or at most 3600000");
  }
  if (config.pending_share_cache_mib() < -1 || config.pending_share_cache_mib() > 65536) {
    return absl::InvalidArgumentError(
        "pending_share_cache_mib must be -1 (none), 0 (default 256) or at most 65536");
  }
  if (config.lease_ms() != 0 && (config.lease_ms() < 100 || config.lease_ms() > 3600000)) {
    return absl::InvalidArgumentError("lease_ms must be 0 (default 30000) or in [100, 3600000]");
  }
  if (role == Role::kLeader && config.peer().address().empty()) {
    return absl::InvalidArgumentError("the leader needs peer.address (its helper's peer listener)");
  }
  if (role == Role::kLeader && !config.peer_listen_address().empty()) {
    return absl::InvalidArgumentError("peer_listen_address is for the helper only");
  }
  const proto::TlsConfig& tls = config.tls();
  if (tls.insecure_plaintext()) {
    TANDEM_RETURN_IF_ERROR(RequireLoopback("listen_address", config.listen_address()));
    TANDEM_RETURN_IF_ERROR(
        RequireLoopback("collector_listen_address", config.collector_listen_address()));
    TANDEM_RETURN_IF_ERROR(RequireLoopback("peer_listen_address", config.peer_listen_address()));
    TANDEM_RETURN_IF_ERROR(RequireLoopback("peer.address", config.peer().address()));
  } else {
    if (tls.cert_chain_path().empty() || tls.private_key_path().empty()) {
      return absl::InvalidArgumentError(
          "tls.cert_chain_path and tls.private_key_path are required (or tls.insecure_plaintext)");
    }
    if (tls.root_ca_path().empty()) {
      return absl::InvalidArgumentError(
          "tls.root_ca_path is required: the internal listeners verify their callers");
    }
    if (config.collector_listen_address().empty() ||
        SameListener(config.collector_listen_address(), config.listen_address())) {
      return absl::InvalidArgumentError(
          "collector_listen_address is required with TLS and must differ from listen_address");
    }
    if (config.coordinator_identities().empty()) {
      return absl::InvalidArgumentError(
          "coordinator_identities must name who may call the collector API");
    }
    if (role == Role::kHelper) {
      if (config.peer_listen_address().empty() ||
          SameListener(config.peer_listen_address(), config.listen_address()) ||
          SameListener(config.peer_listen_address(), config.collector_listen_address())) {
        return absl::InvalidArgumentError(
            "the helper needs its own peer_listen_address with TLS");
      }
      if (config.leader_identities().empty()) {
        return absl::InvalidArgumentError("leader_identities must name who may call the peer API");
      }
    }
  }
  if (const std::string& m = config.metrics_listen_address(); !m.empty()) {
    for (const std::string* other : {&config.listen_address(), &config.collector_listen_address(),
                                     &config.peer_listen_address()}) {
      if (SameListener(m, *other)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metrics_listen_address ", m, " is also a gRPC listener: give /metrics its own port"));
      }
    }
    if (m.rfind(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics_listen_address must be host:port, got '", m, "'"));
    }
  }
  if (config.coordinator_public_key_path().empty() && !config.allow_unticketed_uploads()) {
    return absl::InvalidArgumentError(
        "coordinator_public_key_path is required (uploads need a coordinator ticket), or set "
        "allow_unticketed_uploads explicitly");
  }
  return PolicySet::FromConfig(config).status();
}

}  // namespace tandem::aggregator
