// ValidateConfig: the trust settings a daemon refuses to start without.
#include "aggregator/service/daemon.h"

#include "aggregator/core/postgres_store_factory.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

proto::AggregatorConfig Helper() {
  proto::AggregatorConfig c;
  c.set_role("helper");
  c.set_listen_address("0.0.0.0:7002");
  c.set_collector_listen_address("0.0.0.0:7012");
  c.set_peer_listen_address("0.0.0.0:7022");
  c.set_state_path("/tmp/h");
  c.mutable_tls()->set_cert_chain_path("helper.pem");
  c.mutable_tls()->set_private_key_path("helper.key");
  c.mutable_tls()->set_root_ca_path("roots.pem");
  c.add_coordinator_identities("coordinator.tandem");
  c.add_leader_identities("leader.tandem");
  c.set_coordinator_public_key_path("ticket.pub");
  return c;
}

TEST(ValidateConfigTest, AFullTlsHelperAndLeaderPass) {
  EXPECT_THAT(ValidateConfig(Helper()), IsOk());
  proto::AggregatorConfig leader = Helper();
  leader.set_role("leader");
  leader.clear_peer_listen_address();
  leader.clear_leader_identities();
  leader.mutable_peer()->set_address("helper:7022");
  EXPECT_THAT(ValidateConfig(leader), IsOk());
  leader.set_peer_listen_address("0.0.0.0:7022");
  EXPECT_THAT(ValidateConfig(leader), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ValidateConfigTest, InternalListenersNeedTheirOwnPortsAndIdentities) {
  auto refused = [](auto change, const char* why) {
    proto::AggregatorConfig c = Helper();
    change(c);
    EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)));
  };
  refused([](auto& c) { c.clear_collector_listen_address(); }, "collector_listen_address");
  refused([](auto& c) { c.set_collector_listen_address("0.0.0.0:7002"); }, "must differ");
  refused([](auto& c) { c.clear_coordinator_identities(); }, "coordinator_identities");
  refused([](auto& c) { c.clear_peer_listen_address(); }, "peer_listen_address");
  refused([](auto& c) { c.clear_leader_identities(); }, "leader_identities");
  refused([](auto& c) { c.mutable_tls()->clear_root_ca_path(); }, "root_ca_path");
  // Port 0 twice is fine: each listener gets its own free port.
  proto::AggregatorConfig zero = Helper();
  zero.set_listen_address("127.0.0.1:0");
  zero.set_collector_listen_address("127.0.0.1:0");
  zero.set_peer_listen_address("127.0.0.1:0");
  EXPECT_THAT(ValidateConfig(zero), IsOk());
}

TEST(ValidateConfigTest, TicketsAreRequiredUnlessExplicitlyWaived) {
  proto::AggregatorConfig c = Helper();
  c.clear_coordinator_public_key_path();
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("coordinator_public_key_path")));
  c.set_allow_unticketed_uploads(true);
  EXPECT_THAT(ValidateConfig(c), IsOk());
}

TEST(ValidateConfigTest, PlaintextOnlyOnLoopback) {
  proto::AggregatorConfig c;
  c.set_role("helper");
  c.set_state_path("/tmp/h");
  c.set_allow_unticketed_uploads(true);
  c.mutable_tls()->set_insecure_plaintext(true);
  for (const char* ok : {"127.0.0.1:7002", "localhost:7002", "[::1]:7002", "127.3.4.5:0"}) {
    c.set_listen_address(ok);
    EXPECT_THAT(ValidateConfig(c), IsOk()) << ok;
  }
  for (const char* bad : {"0.0.0.0:7002", "10.0.0.4:7002", "[::]:7002", "helper:7002"}) {
    c.set_listen_address(bad);
    EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("non-loopback")))
        << bad;
  }
  c.set_listen_address("127.0.0.1:7002");
  c.set_collector_listen_address("0.0.0.0:7012");
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ValidateConfigTest, PoliciesAreValidated) {
  proto::AggregatorConfig c = Helper();
  c.mutable_default_policy()->set_min_batch_size(0);
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("min_batch_size")));
}

TEST(ValidateConfigTest, MetricsListenerHasItsOwnPort) {
  proto::AggregatorConfig c = Helper();
  c.set_metrics_listen_address("127.0.0.1:9102");
  EXPECT_THAT(ValidateConfig(c), IsOk());
  c.set_metrics_listen_address("0.0.0.0:7012");
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("metrics_listen_address")));
  c.set_metrics_listen_address("9102");
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("host:port")));
}

TEST(ValidateConfigTest, PostgresExcludesTheSqliteSettings) {
  proto::AggregatorConfig c = Helper();
  c.set_postgres_conninfo("host=127.0.0.1 dbname=tandem");
  c.set_segment_share_files(true);
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("segment_share_files")));
  c.set_segment_share_files(false);
  c.set_relaxed_durability(true);
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("relaxed_durability")));
  c.set_relaxed_durability(false);
  if (PostgresStoreBuiltIn()) {
    EXPECT_THAT(ValidateConfig(c), IsOk());
  } else {
    EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("built without")));
  }
  c.clear_postgres_conninfo();  // SQLite again: its settings are fine
  c.set_segment_share_files(true);
  c.set_relaxed_durability(true);
  EXPECT_THAT(ValidateConfig(c), IsOk());
}

TEST(ValidateConfigTest, ReplicasNeedPostgresAndAWellFormedId) {
  proto::AggregatorConfig c = Helper();
  c.set_replica_id("helper-0");
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("replica_id needs postgres_conninfo")));
  if (!PostgresStoreBuiltIn()) return;
  c.set_postgres_conninfo("host=127.0.0.1 dbname=tandem");
  EXPECT_THAT(ValidateConfig(c), IsOk());
  for (const char* bad : {"has space", "semi;colon", "a'b",
                          "0123456789012345678901234567890123456789012345678901234567890123"}) {
    c.set_replica_id(bad);
    EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  c.set_replica_id("tandem-helper-7c9d.pod_1");
  for (uint32_t lease : {1u, 99u, 3600001u}) {
    c.set_lease_ms(lease);
    EXPECT_THAT(ValidateConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lease_ms")))
        << lease;
  }
  c.set_lease_ms(100);
  for (int64_t idle : {int64_t{-2}, int64_t{3600001}}) {
    c.set_idle_checkpoint_ms(idle);
    EXPECT_THAT(ValidateConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("idle_checkpoint_ms")))
        << idle;
  }
  c.set_idle_checkpoint_ms(-1);
  EXPECT_THAT(ValidateConfig(c), IsOk());
}

TEST(ValidateConfigTest, ClockSkewToleranceIsBounded) {
  proto::AggregatorConfig c = Helper();
  for (int64_t skew : {int64_t{-2}, int64_t{3600001}}) {
    c.set_max_clock_skew_ms(skew);
    EXPECT_THAT(ValidateConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_clock_skew_ms")))
        << skew;
  }
  for (int64_t skew : {int64_t{-1}, int64_t{0}, int64_t{3600000}}) {
    c.set_max_clock_skew_ms(skew);
    EXPECT_THAT(ValidateConfig(c), IsOk()) << skew;
  }
}

TEST(ValidateConfigTest, ShareCacheSizeIsBounded) {
  proto::AggregatorConfig c = Helper();
  for (int64_t mib : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{65536}}) {
    c.set_pending_share_cache_mib(mib);
    EXPECT_THAT(ValidateConfig(c), IsOk()) << mib;
  }
  for (int64_t mib : {int64_t{-2}, int64_t{65537}, int64_t{1} << 44}) {
    c.set_pending_share_cache_mib(mib);
    EXPECT_THAT(ValidateConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pending_share_cache_mib")))
        << mib;
  }
}

TEST(UploadLimitTest, FollowsThePolicyNotABlanketLimit) {
  EXPECT_EQ(UploadLimitBytes(uint64_t{1} << 18), 17 * (int64_t{1} << 18) + (1 << 20));
  EXPECT_LT(UploadLimitBytes(uint64_t{1} << 18), int64_t{8} << 20);
  // A report at D = 2^20, k * B = 2^14 (upload ~134 KB + a ~136 KB witness) fits.
  EXPECT_GT(UploadLimitBytes(uint64_t{1} << 14), 300000);
}

}  // namespace
}  // namespace tandem::aggregator
