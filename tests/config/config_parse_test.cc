// Every example config under deploy/config and deploy/compose parses into
// its proto and carries what the daemon needs to start with TLS and roles
// (issue 17), so examples cannot go stale. (The daemon's own validation runs
// in deploy_files_test, through tandem-aggregator --check_config.)
#include <filesystem>
#include <fstream>
#include <sstream>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"

namespace tandem {
namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void CheckAggregatorConfigs(const std::string& dir) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    const std::string name = entry.path().string();
    const std::string base = entry.path().filename().string();
    if (base.rfind("leader", 0) != 0 && base.rfind("helper", 0) != 0) continue;
    ++seen;
    proto::AggregatorConfig c;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(Read(entry.path()), &c)) << name;
    EXPECT_TRUE(c.role() == "leader" || c.role() == "helper") << name;
    EXPECT_EQ(base.rfind(c.role(), 0), 0u) << name << " holds role " << c.role();
    EXPECT_FALSE(c.listen_address().empty()) << name;
    EXPECT_FALSE(c.state_path().empty()) << name;
    // Examples never run in plaintext: TLS material must be named.
    EXPECT_FALSE(c.tls().insecure_plaintext()) << name;
    EXPECT_FALSE(c.tls().cert_chain_path().empty()) << name;
    EXPECT_FALSE(c.tls().private_key_path().empty()) << name;
    EXPECT_FALSE(c.tls().root_ca_path().empty()) << name;
    // Roles: the collector listener is separate and names the coordinator;
    // uploads need the coordinator's tickets.
    EXPECT_FALSE(c.collector_listen_address().empty()) << name;
    EXPECT_NE(c.collector_listen_address(), c.listen_address()) << name;
    EXPECT_GT(c.coordinator_identities_size(), 0) << name;
    EXPECT_FALSE(c.coordinator_public_key_path().empty()) << name;
    EXPECT_FALSE(c.allow_unticketed_uploads()) << name;
    if (c.role() == "leader") {
      EXPECT_FALSE(c.peer().address().empty()) << name;
      EXPECT_FALSE(c.peer().server_name().empty()) << name << ": the helper's identity is pinned";
    } else {
      EXPECT_FALSE(c.peer_listen_address().empty()) << name;
      EXPECT_NE(c.peer_listen_address(), c.listen_address()) << name;
      EXPECT_NE(c.peer_listen_address(), c.collector_listen_address()) << name;
      EXPECT_GT(c.leader_identities_size(), 0) << name;
    }
    // The policy is spelled out and no weaker than the private defaults.
    ASSERT_TRUE(c.has_default_policy()) << name;
    const proto::PrivacyPolicy& p = c.default_policy();
    EXPECT_TRUE(p.has_min_noise_multiplier() && p.min_noise_multiplier() >= 1.0) << name;
    EXPECT_TRUE(p.has_min_batch_size() && p.min_batch_size() >= 10) << name;
    EXPECT_TRUE(p.has_epsilon_budget() && p.epsilon_budget() <= 10) << name;
    EXPECT_TRUE(p.has_delta() && p.delta() <= 1e-5) << name;
    EXPECT_TRUE(p.has_sampling_rate() && p.sampling_rate() >= 1.0) << name;
    EXPECT_TRUE(p.has_require_norm_proofs() && p.require_norm_proofs()) << name;
  }
  EXPECT_GE(seen, 2) << dir;
}

TEST(DeployConfigs, AggregatorConfigsParseAndAreComplete) {
  CheckAggregatorConfigs(TANDEM_SOURCE_DIR "/deploy/config");
}

TEST(DeployConfigs, ComposeConfigsParseAndAreComplete) {
  CheckAggregatorConfigs(TANDEM_SOURCE_DIR "/deploy/compose");
}

TEST(DeployConfigs, UnknownFieldIsAnError) {
  proto::AggregatorConfig c;
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("rol: \"leader\"", &c));
}

}  // namespace
}  // namespace tandem
