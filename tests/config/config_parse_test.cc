// Every example config under deploy/config parses into its proto and passes
// the checks the daemon makes before it starts, so examples cannot go stale.
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

TEST(DeployConfigs, AggregatorConfigsParseAndAreComplete) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TANDEM_SOURCE_DIR "/deploy/config")) {
    if (entry.path().extension() != ".textproto") continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind("leader", 0) != 0 && name.rfind("helper", 0) != 0) continue;
    ++seen;
    proto::AggregatorConfig c;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(Read(entry.path()), &c)) << name;
    EXPECT_TRUE(c.role() == "leader" || c.role() == "helper") << name;
    EXPECT_EQ(name.rfind(c.role(), 0), 0u) << name << " holds role " << c.role();
    EXPECT_FALSE(c.listen_address().empty()) << name;
    EXPECT_FALSE(c.state_path().empty()) << name;
    if (c.role() == "leader") EXPECT_FALSE(c.peer().address().empty()) << name;
    // Examples never run in plaintext: TLS material must be named.
    EXPECT_FALSE(c.tls().insecure_plaintext()) << name;
    EXPECT_FALSE(c.tls().cert_chain_path().empty()) << name;
    EXPECT_FALSE(c.tls().private_key_path().empty()) << name;
    EXPECT_FALSE(c.tls().root_ca_path().empty()) << name;
  }
  EXPECT_GE(seen, 2);
}

TEST(DeployConfigs, UnknownFieldIsAnError) {
  proto::AggregatorConfig c;
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("rol: \"leader\"", &c));
}

}  // namespace
}  // namespace tandem
