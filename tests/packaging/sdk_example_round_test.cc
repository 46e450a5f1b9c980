// examples/cpp_app, built by debian_packages_test.sh against the SDK as the
// packages install it (find_package(tandem) from libtandem-client-dev),
// takes part in a private round with the real daemons of this build tree:
// one copy linked with libtandem_client.so.0, one with libtandem_client.a,
// each on its shard of the digits training split (the CSV the example
// reads, written from the same data tandem-client trains on). The round
// must release with both reports counted by both aggregators.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ml/data/dataset.h"
#include "tests/integration/federation_fixture.h"

namespace tandem::testing {
namespace {

class SdkExampleRoundTest : public FederationFixture {};

// The digits training split (the coordinator's --data_seed=1 split) as the
// example's CSV: 64 pixels in [0, 16], then the label.
std::string WriteDigitsCsv(const std::string& path) {
  absl::StatusOr<std::pair<ml::Dataset, ml::Dataset>> split =
      ml::LoadNamedDataset("digits", /*split_seed=*/1);
  if (!split.ok()) return "";
  const ml::Dataset* all = &split->first;
  std::ofstream out(path);
  for (int64_t i = 0; i < all->size(); ++i) {
    for (int64_t j = 0; j < all->features.cols(); ++j) {
      out << static_cast<int>(all->features(i, j) * 16.0f + 0.5f) << ",";
    }
    out << all->labels[i] << "\n";
  }
  return out ? path : "";
}

TEST_F(SdkExampleRoundTest, TheInstalledSdkTakesPartInAPrivateRound) {
  const std::string app_dir = TANDEM_CPP_APP_DIR;  // debian_packages_test.sh's app-build
  const std::string csv = WriteDigitsCsv(dir_ + "/digits.csv");
  ASSERT_FALSE(csv.empty()) << "cannot write the digits CSV";
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(
      {"--rounds=1", "--min_reports=2", "--target_reports=2", "--round_timeout_s=60"}));

  std::vector<std::unique_ptr<ChildProcess>> apps;
  const std::vector<std::string> binaries = {app_dir + "/cpp_app", app_dir + "/cpp_app_static"};
  for (int k = 0; k < 2; ++k) {
    const std::string id = absl::StrCat("app", k);
    absl::StatusOr<std::string> token = WriteEnrollmentToken(dir_, dir_ + "/" + id + ".token");
    ASSERT_TRUE(token.ok()) << token.status();
    auto p = ChildProcess::Spawn(
        binaries[k],
        {absl::StrCat("--coordinator=127.0.0.1:", port_), "--client_id=" + id,
         "--tls_ca=" + dir_ + "/ca.pem", "--leader=" + pair_.leader_address(),
         "--leader_name=leader.tandem", "--helper=" + pair_.helper_address(),
         "--helper_name=helper.tandem", "--token_file=" + *token, "--state_dir=" + dir_ + "/" + id,
         "--data=" + csv, absl::StrCat("--shard=", k), "--num_shards=2", "--feature_scale=16",
         "--rounds=1"},
        dir_ + "/" + id + ".log");
    ASSERT_TRUE(p.ok()) << p.status();
    apps.push_back(*std::move(p));
  }
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<int> rc = apps[k]->Wait(absl::Seconds(120));
    ASSERT_TRUE(rc.ok()) << binaries[k] << " still running: " << rc.status();
    EXPECT_EQ(*rc, 0) << binaries[k] << ": " << ReadAll(dir_ + "/app" + std::to_string(k) + ".log");
    EXPECT_NE(ReadAll(dir_ + "/app" + std::to_string(k) + ".log").find("contributed to round"),
              std::string::npos);
  }
  const proto::CoordinatorStatusResponse s =
      WaitFor([](const auto& s) { return s.completed_rounds() >= 1; }, absl::Seconds(60));
  ASSERT_GE(s.completed_rounds(), 1u) << s.DebugString();
  ASSERT_GE(s.history_size(), 1);
  EXPECT_EQ(s.history(0).accepted_reports(), 2u) << s.DebugString();
  EXPECT_GT(s.history(0).accuracy(), 0.0);
}

}  // namespace
}  // namespace tandem::testing
