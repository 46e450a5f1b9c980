#include "base/net_address.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(NetAddressTest, HostOf) {
  EXPECT_EQ(HostOf("127.0.0.1:7001"), "127.0.0.1");
  EXPECT_EQ(HostOf("[::1]:7001"), "::1");
  EXPECT_EQ(HostOf("helper.tandem:7022"), "helper.tandem");
  EXPECT_EQ(HostOf("localhost"), "localhost");
  EXPECT_EQ(HostOf("::1"), "::1");  // a bare IPv6 address has no port
}

TEST(NetAddressTest, OnlyLoopbackIsLoopback) {
  for (const char* a : {"127.0.0.1:0", "127.9.8.7:1", "localhost:7000", "LOCALHOST:1", "[::1]:5",
                        "[0:0:0:0:0:0:0:1]:5", "[::ffff:127.0.0.1]:9", "127.255.255.254"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:7000", "[::]:7000", "10.0.0.1:1", "128.0.0.1:1",
                        "localhost.example.com:1", "helper:7002", "",
                        // Names that only look like loopback addresses.
                        "127.evil.example:7000", "127.0.0.1.nip.io:1", "127.0.0.1x:1",
                        "[::ffff:10.0.0.1]:1", "127.0.0.256:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

}  // namespace
}  // namespace tandem
